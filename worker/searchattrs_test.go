package worker

import (
	"strings"
	"testing"
)

func TestSearchAttributeHintNamesEveryAttribute(t *testing.T) {
	hint := searchAttributeHint()
	for _, want := range []string{"DroverStatus=Keyword", "DroverCostUSD=Double", "DroverTurns=Int", "DroverModel=Keyword", "DroverWorkspace=Keyword"} {
		if !strings.Contains(hint, want) {
			t.Errorf("hint %q lacks %s", hint, want)
		}
	}
}
