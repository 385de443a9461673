package engine

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/task"
)

// maxAttachmentBytes bounds one attached image; the Messages API refuses
// larger ones anyway.
const maxAttachmentBytes = 5 << 20

// errOutsideWorkspace reports a path that escapes its workspace.
var errOutsideWorkspace = errors.New("path escapes the workspace")

// resolveWorkspace checks that dir is an existing directory (inside root, when root is set)
// and returns its absolute, symlink-free form. A workspace that is not there is
// WorkspaceMissing; one that is not acceptable, InvalidInput.
func resolveWorkspace(root, dir string) (string, *Error) {
	invalid := func(format string, args ...any) (string, *Error) {
		return "", failure(task.ErrTypeInvalidInput, format, args...)
	}
	if dir == "" {
		return invalid("the task has no workspace")
	}
	if !filepath.IsAbs(dir) {
		return invalid("the workspace %q is not an absolute path", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(real); err == nil && !st.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		return "", failure(task.ErrTypeWorkspaceMissing, "the workspace %s is not a directory on this host: %v", dir, err)
	}
	if root != "" {
		rootReal, err := filepath.EvalSymlinks(root)
		if err != nil {
			return invalid("the workspace root %q: %v", root, err)
		}
		if !within(rootReal, real) {
			return invalid("the workspace %q is outside the workspace root %q", dir, root)
		}
	}
	return real, nil
}

// within reports whether path is base or below it. Both must be clean and absolute.
func within(base, path string) bool {
	rel, err := filepath.Rel(base, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel))
}

// loadAttachments reads the attached images. Each path is taken relative to
// the workspace and must stay inside it, symlinks included.
func loadAttachments(workspace string, paths []string) ([]claudecode.Image, error) {
	var out []claudecode.Image
	for _, p := range paths {
		img, err := loadAttachment(workspace, p)
		if err != nil {
			return nil, fmt.Errorf("attachment %q: %w", p, err)
		}
		out = append(out, img)
	}
	return out, nil
}

func loadAttachment(workspace, p string) (claudecode.Image, error) {
	var img claudecode.Image
	if p == "" || strings.ContainsRune(p, 0) {
		return img, errors.New("invalid path")
	}
	full := p
	if !filepath.IsAbs(full) {
		full = filepath.Join(workspace, p)
	}
	full = filepath.Clean(full)
	if !within(workspace, full) {
		return img, errOutsideWorkspace
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return img, err
	}
	if !within(workspace, real) {
		return img, errOutsideWorkspace
	}
	f, err := os.Open(real)
	if err != nil {
		return img, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return img, err
	}
	if !st.Mode().IsRegular() {
		return img, errors.New("not a regular file")
	}
	if st.Size() > maxAttachmentBytes {
		return img, fmt.Errorf("%d bytes is more than the %d allowed", st.Size(), maxAttachmentBytes)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return img, err
	}
	mt := http.DetectContentType(data)
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
	default:
		return img, fmt.Errorf("unsupported type %s (PNG, JPEG, GIF and WebP images are supported)", mt)
	}
	return claudecode.Image{MediaType: mt, Data: data}, nil
}
