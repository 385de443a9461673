package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// parseAllowList reads the tests allowed to skip: one "PACKAGE TEST # why" a line, where TEST
// may name a subtest (TestTable/case). Blank lines and lines starting with # are ignored. An
// entry without its reason is an error: an allowed skip must say why it is allowed.
func parseAllowList(r io.Reader) (map[testID]string, error) {
	allowed := map[testID]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		entry, why, _ := strings.Cut(line, "#")
		why = strings.TrimSpace(why)
		fields := strings.Fields(entry)
		if len(fields) != 2 {
			return nil, fmt.Errorf("allow-list line %d: want \"PACKAGE TEST # why\", got %q", n, line)
		}
		if why == "" {
			return nil, fmt.Errorf("allow-list line %d: %s %s: say why it may skip after a #", n, fields[0], fields[1])
		}
		id := testID{fields[0], fields[1]}
		if _, dup := allowed[id]; dup {
			return nil, fmt.Errorf("allow-list line %d: %s listed twice", n, id)
		}
		allowed[id] = why
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the allow-list: %w", err)
	}
	return allowed, nil
}
