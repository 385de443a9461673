// Command mapdecode is the baseline of figure P1: it reads a stream-json transcript and decodes each
// line into a map[string]any with encoding/json, the plainest decoder a Go program can have, writing
// nothing. Lines have no length limit.
//
//	mapdecode FILE
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mapdecode FILE")
		os.Exit(2)
	}
	lines, err := decodeFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "mapdecode:", err)
		os.Exit(1)
	}
	if lines == 0 {
		fmt.Fprintln(os.Stderr, "mapdecode: no line decoded")
		os.Exit(1)
	}
}

// decodeFile decodes every non-blank line of the file and returns how many decoded.
func decodeFile(name string) (int, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	n := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				n++
			}
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("reading %s: %w", name, err)
		}
	}
}
