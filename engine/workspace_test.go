package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A 1×1 PNG.
var tinyPNG = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89}

func TestAttachmentsStayInsideTheWorkspace(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, "img", "ok.png"), tinyPNG)
	mustWrite(t, filepath.Join(root, "secret.png"), tinyPNG)
	mustWrite(t, filepath.Join(ws, "notes.txt"), []byte("plain text"))
	if err := os.Symlink(filepath.Join(root, "secret.png"), filepath.Join(ws, "link.png")); err != nil {
		t.Fatal(err)
	}

	imgs, err := loadAttachments(ws, []string{"img/ok.png", filepath.Join(ws, "img", "ok.png")})
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 2 || imgs[0].MediaType != "image/png" || len(imgs[0].Data) != len(tinyPNG) {
		t.Fatalf("loaded %+v", imgs)
	}

	for _, p := range []string{"../secret.png", "img/../../secret.png", filepath.Join(root, "secret.png"), "link.png"} {
		if _, err := loadAttachments(ws, []string{p}); !errors.Is(err, errOutsideWorkspace) {
			t.Errorf("%s: err = %v, want it refused as outside the workspace", p, err)
		}
	}
	for _, p := range []string{"notes.txt", "missing.png", "", "img"} {
		if _, err := loadAttachments(ws, []string{p}); err == nil {
			t.Errorf("%q: accepted", p)
		}
	}
}

func TestWorkspaceMustBeInsideTheRoot(t *testing.T) {
	root := t.TempDir()
	inside := filepath.Join(root, "a")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveWorkspace(root, inside); err != nil {
		t.Errorf("inside: %v", err)
	}
	if _, err := resolveWorkspace(root, t.TempDir()); err == nil {
		t.Error("a workspace outside the root was accepted")
	}
	if _, err := resolveWorkspace("", filepath.Join(root, "missing")); err == nil {
		t.Error("a missing workspace was accepted")
	}
	sibling := root + "-sibling"
	if err := os.Mkdir(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sibling)
	if _, err := resolveWorkspace(root, sibling); err == nil {
		t.Error("a sibling with the root as prefix was accepted")
	}
}

func TestAttemptPromptUUID(t *testing.T) {
	const p = "0b6a4b4e-4f3e-4c57-9d3c-1e0b7f3a9a11"
	if attemptPromptUUID(p, 1) != p {
		t.Error("the first attempt must use the workflow's uuid")
	}
	a2, a3 := attemptPromptUUID(p, 2), attemptPromptUUID(p, 3)
	if a2 == p || a3 == p || a2 == a3 || a2 != attemptPromptUUID(p, 2) {
		t.Errorf("retries must get distinct, stable uuids: %s %s", a2, a3)
	}
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
