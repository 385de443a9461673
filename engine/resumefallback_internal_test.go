package engine

import (
	"strings"
	"testing"
)

// A transcript with a branch beside the committed chain (a lost attempt's prompt, a truncating
// resume's leftovers) and a line cut short is rebuilt with the committed chain alone, lines
// without a uuid kept in their place.
func TestChainLinesKeepsTheCommittedChain(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"type":"file-history-snapshot","messageId":"m"}`,
		`{"type":"user","uuid":"u1","parentUuid":null}`,
		`{"type":"assistant","uuid":"a1","parentUuid":"u1"}`,
		`{"type":"user","uuid":"lost","parentUuid":"a1"}`,
		`{"type":"assistant","uuid":"lost2","parentUuid":"lost"}`,
		`{"type":"system","uuid":"c1","parentUuid":null,"logicalParentUuid":"a1"}`,
		`{"type":"user","uuid":"u2","parentUuid":"c1"}`,
		`{"type":"assistant","uuid":"a2","parentUuid":"u2"}`,
		`{"type":"system","uuid":"after","parentUuid":"a2"}`,
		`{"type":"user","uuid":"cut","par`,
	}, "\n")
	out, dropped, held := chainLines([]byte(in), "a2")
	want := strings.Join([]string{
		`{"type":"file-history-snapshot","messageId":"m"}`,
		`{"type":"user","uuid":"u1","parentUuid":null}`,
		`{"type":"assistant","uuid":"a1","parentUuid":"u1"}`,
		`{"type":"system","uuid":"c1","parentUuid":null,"logicalParentUuid":"a1"}`,
		`{"type":"user","uuid":"u2","parentUuid":"c1"}`,
		`{"type":"assistant","uuid":"a2","parentUuid":"u2"}`,
	}, "\n") + "\n"
	if string(out) != want || dropped != 4 || !held {
		t.Errorf("chainLines = %d dropped,\n%s\nwant 4 dropped,\n%s", dropped, out, want)
	}
	if out, dropped, held := chainLines([]byte(in), "nowhere"); dropped != 0 || string(out) != in || held {
		t.Errorf("a transcript without the uuid changed: %d dropped", dropped)
	}
}
