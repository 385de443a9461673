package console

import (
	"strings"
	"testing"
)

// TestNoMarkupFromData keeps the scripts free of the calls that parse markup: every element is
// built with createElement and every text set with text nodes.
func TestNoMarkupFromData(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"app.js", "api.js", "dom.js", "render.js", EnumsFile, "index.html"} {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute(\"on", "javascript:"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
		if name == "index.html" && (strings.Contains(string(b), "<script>") || strings.Contains(string(b), " style=")) {
			t.Errorf("index.html has inline script or style")
		}
	}
}
