package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestInterleaveAlternates(t *testing.T) {
	t.Parallel()
	var order []string
	step := 0
	mk := func(name string) func(context.Context) (Sample, error) {
		return func(context.Context) (Sample, error) {
			step++
			order = append(order, name)
			return Sample{Wall: time.Duration(step)}, nil
		}
	}
	base, subj, err := Interleave(context.Background(), 3, mk("b"), mk("s"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ""); got != "bssbbs" {
		t.Errorf("order = %s, want bssbbs", got)
	}
	// Samples stay with their side whatever the order.
	if base[1].Wall != 4 || subj[1].Wall != 3 || len(base) != 3 || len(subj) != 3 {
		t.Errorf("base %v subj %v", base, subj)
	}
	if r := WallRatios(base, subj); len(r) != 3 || r[0] != 0.5 {
		t.Errorf("ratios = %v", r)
	}
}

func TestGoals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		g    Goal
		row  Row
		met  bool
		text string
	}{
		{RatioAtLeast(1.5), Row{Ratio: 1.6}, true, "≥ 1.5×"},
		{RatioAtLeast(1.5), Row{Ratio: 1.4}, false, "≥ 1.5×"},
		{RatioAtMost(1.2), Row{Ratio: 1.1}, true, "≤ 1.2×"},
		{DroverAtMost(30, "MiB"), Row{Drover: 31, Ratio: 9}, false, "≤ 30 MiB"},
		{DroverAtLeast(20000, "events/s"), Row{Drover: 25000}, true, "≥ 20000 events/s"},
		{RatioAtLeast(1), Row{Ratio: math.NaN()}, false, "≥ 1×"},
	} {
		if got := c.g.Met(c.row); got != c.met {
			t.Errorf("%v met by %+v = %v", c.g, c.row, got)
		}
		if c.g.String() != c.text {
			t.Errorf("goal text %q, want %q", c.g.String(), c.text)
		}
	}
}

func TestRunReportsEveryFigure(t *testing.T) {
	t.Parallel()
	ok := Figure{ID: "A", What: "a", Goal: RatioAtLeast(2), Measure: func(context.Context, *Env) ([]Row, error) {
		return []Row{{Figure: "A", What: "a", Unit: "s", Baseline: 2, Drover: 0.5, Ratio: 4, Goal: RatioAtLeast(2)},
			{Figure: "A rss", What: "a rss", Unit: "MiB", Drover: 40, Goal: DroverAtMost(30, "MiB")}}, nil
	}}
	broken := Figure{ID: "B", What: "b", Goal: RatioAtMost(1.2), Measure: func(context.Context, *Env) ([]Row, error) {
		return nil, errors.New("no server")
	}}
	never := Figure{ID: "C", What: "c", Goal: RatioAtMost(1.5), Measure: func(context.Context, *Env) ([]Row, error) {
		t.Error("a filtered figure ran")
		return nil, nil
	}}
	rep, err := Run(context.Background(), Config{Figures: []Figure{ok, broken, never}, Only: []string{"A", "B"}, Env: &Env{}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Status{StatusPass, StatusFail, StatusError, StatusSkipped}
	if len(rep.Rows) != len(want) {
		t.Fatalf("rows = %+v", rep.Rows)
	}
	for i, s := range want {
		if rep.Rows[i].Status != s {
			t.Errorf("row %d (%s) = %s, want %s", i, rep.Rows[i].Figure, rep.Rows[i].Status, s)
		}
	}
	if !rep.Failed() {
		t.Error("a failed and a broken figure did not fail the report")
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"4.00×", "0.5 s", "40 MiB", "≤ 30 MiB", "error: no server", "skipped: not selected by -only"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	var back Report
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &back) != nil || len(back.Rows) != 4 {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}

	// In a quick run a missed goal is reported but does not fail; an error still does.
	rep.Quick = true
	rep.Rows = rep.Rows[:2]
	if rep.Failed() {
		t.Error("a quick run failed on a missed goal")
	}
}

func TestRunProcess(t *testing.T) {
	t.Parallel()
	s, err := RunProcess(exec.Command("sh", "-c", "sleep 0.05"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Wall < 50*time.Millisecond || s.MaxRSS <= 0 {
		t.Errorf("sample = %+v", s)
	}
	if _, err := RunProcess(exec.Command("sh", "-c", "echo boom >&2; exit 3")); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing process: err = %v", err)
	}
}
