// Command testgate judges a `go test -json` run read from its standard input: it prints the
// output as `go test` would (failed and skipped tests' output, one line per package) while the
// run streams, then a summary, and exits 1 if any test failed or never finished, any package
// or build failed, or any test skipped without an entry in the allow-list. With the pinned
// tools installed, no real-parts test has a reason to skip, so a skip is a failure.
//
//	go test -json ./... | go run ./internal/testkit/testgate -allow .ci/skip-allowlist
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the program: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	allowPath := fs.String("allow", "", "the allow-list: one \"PACKAGE TEST # why\" a line of tests that may skip")
	verbose := fs.Bool("v", false, "print every line of the tests' output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "testgate: unexpected arguments %q: the test stream comes on standard input\n", fs.Args())
		return 2
	}
	g := &Gate{Out: stdout, Verbose: *verbose}
	if *allowPath != "" {
		f, err := os.Open(*allowPath)
		if err != nil {
			fmt.Fprintf(stderr, "testgate: %v\n", err)
			return 2
		}
		g.Allowed, err = parseAllowList(f)
		_ = f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "testgate: %s: %v\n", *allowPath, err)
			return 2
		}
	}
	ok, err := g.Run(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "testgate: %v\n", err)
		return 2
	}
	if !ok {
		return 1
	}
	return 0
}
