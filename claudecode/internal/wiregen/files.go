package wiregen

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Args are the generator's command line: wiregen -o OUTPUT SOURCE.go…, file names relative to the
// package's folder.
type Args struct {
	Output  string
	Sources []string
}

// ParseArgs reads the command line (without the program's name).
func ParseArgs(args []string) (Args, error) {
	fs := flag.NewFlagSet("wiregen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "the file to write")
	if err := fs.Parse(args); err != nil {
		return Args{}, fmt.Errorf("reading the command line: %w", err)
	}
	if *out == "" || fs.NArg() == 0 {
		return Args{}, errors.New("reading the command line: usage: wiregen -o OUTPUT SOURCE.go…")
	}
	return Args{Output: *out, Sources: fs.Args()}, nil
}

// ReadSources reads a's sources from the folder dir.
func ReadSources(dir string, a Args) ([]File, error) {
	files := make([]File, len(a.Sources))
	for i, name := range a.Sources {
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading the sources: %w", err)
		}
		files[i] = File{Name: name, Src: src}
	}
	return files, nil
}

// Diff returns nil when have and want are the same, or an error that names the first line where
// they differ.
func Diff(name string, have, want []byte) error {
	if bytes.Equal(have, want) {
		return nil
	}
	h, w := bytes.Split(have, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; ; i++ {
		hl, wl := lineAt(h, i), lineAt(w, i)
		if hl != wl {
			return fmt.Errorf("%s differs from what its sources generate at line %d:\n  have %s\n  want %s\n"+
				"(run go generate)", name, i+1, hl, wl)
		}
	}
}

// lineAt returns lines[i] quoted, or "(end of file)".
func lineAt(lines [][]byte, i int) string {
	if i >= len(lines) {
		return "(end of file)"
	}
	return fmt.Sprintf("%q", lines[i])
}
