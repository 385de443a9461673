// Command wiregen writes the decoders of claudecode's wire types from their struct tags (see package
// wiregen). go generate runs it in claudecode's folder:
//
//	wiregen -o wire_decode.go wire.go control_wire.go content.go
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/drover-run/drover/claudecode/internal/wiregen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wiregen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	a, err := wiregen.ParseArgs(args)
	if err != nil {
		return err
	}
	files, err := wiregen.ReadSources(".", a)
	if err != nil {
		return err
	}
	out, err := wiregen.Generate(files)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(a.Output); err == nil && bytes.Equal(old, out) {
		return nil
	}
	if err := os.WriteFile(a.Output, out, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", a.Output, err)
	}
	return nil
}
