package console

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover/task"
)

// enumsDiff returns the lines of have and want that the other lacks, marked - and +.
func enumsDiff(have, want []byte) []string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	var d []string
	for _, l := range h {
		if !slices.Contains(w, l) {
			d = append(d, "- "+l)
		}
	}
	for _, l := range w {
		if !slices.Contains(h, l) {
			d = append(d, "+ "+l)
		}
	}
	return d
}

// TestEnumsModuleIsGenerated regenerates assets/enums.js from package task and compares it with
// the embedded file: a name added, renamed or removed on one side only fails here.
func TestEnumsModuleIsGenerated(t *testing.T) {
	t.Parallel()
	have, err := assets.ReadFile("assets/" + EnumsFile)
	if err != nil {
		t.Fatal(err)
	}
	if d := enumsDiff(have, TaskEnums().JS()); len(d) > 0 {
		t.Errorf("assets/%s is not what package task generates (run go generate ./console/):\n%s", EnumsFile, strings.Join(d, "\n"))
	}
}

// TestEnumsDiffSeesOneSide shows that the comparison above fails on a status added to one side
// only: to the Go list, or by hand to the module.
func TestEnumsDiffSeesOneSide(t *testing.T) {
	t.Parallel()
	file := TaskEnums().JS()
	more := TaskEnums()
	more.Statuses = append(more.Statuses, "paused")
	d := enumsDiff(file, more.JS())
	if !slices.ContainsFunc(d, func(l string) bool { return strings.HasPrefix(l, "+ ") && strings.Contains(l, `PAUSED: "paused"`) }) {
		t.Errorf("a status added in Go only: diff %q", d)
	}
	edited := strings.Replace(string(file), `  IDLE: "idle",`, "  IDLE: \"idle\",\n  PAUSED: \"paused\",", 1)
	d = enumsDiff([]byte(edited), file)
	if !slices.Contains(d, `-   PAUSED: "paused",`) {
		t.Errorf("a status added by hand to the module only: diff %q", d)
	}
}

// TestScriptsTypeNoSharedName keeps the console's scripts from typing a shared name again: a
// status, a permission mode or a request's kind in app.js, an outcome in render.js, as a string literal, instead
// of taking it from enums.js.
func TestScriptsTypeNoSharedName(t *testing.T) {
	t.Parallel()
	literal := regexp.MustCompile(`"([a-z_]+)"|'([a-z_]+)'`)
	var statuses, outcomes, kinds []string
	for _, s := range task.Statuses() {
		statuses = append(statuses, string(s))
	}
	for _, m := range task.PermissionModes() {
		statuses = append(statuses, string(m))
	}
	for _, k := range task.RequestKinds() {
		kinds = append(kinds, string(k))
	}
	for _, o := range task.Outcomes() {
		outcomes = append(outcomes, string(o))
	}
	for file, names := range map[string][]string{"app.js": append(statuses, kinds...), "render.js": outcomes} {
		b, err := assets.ReadFile("assets/" + file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range literal.FindAllStringSubmatch(line, -1) {
				if name := m[1] + m[2]; slices.Contains(names, name) {
					t.Errorf("%s:%d types %q; take it from enums.js", file, i+1, name)
				}
			}
		}
	}
}
