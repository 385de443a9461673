//go:build ignore

// gen_enums writes assets/enums.js from package task (go generate ./console/).
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/drover-run/drover/console"
)

func main() {
	if err := os.WriteFile(filepath.Join("assets", console.EnumsFile), console.TaskEnums().JS(), 0o644); err != nil {
		log.Fatal(err)
	}
}
