// Package bench measures drover against baselines run on the same machine in the same run, and
// reports every figure as a ratio with its goal. Machines are noisy, so a figure runs its baseline and
// its subject alternately, several times, and reports medians: a change in the machine's load falls on
// both sides of the ratio.
//
// A Figure is one entry of the table, with its own setup; the Runner runs the figures in order,
// prints one table and writes the same rows as JSON. A figure runs unless a filter leaves it out, in
// which case its row says so; a figure that fails to run is an error row, never a silent gap.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Status is the outcome of a row.
type Status string

// Row outcomes.
const (
	StatusPass    Status = "pass"
	StatusFail    Status = "fail" // measured, and the goal was missed
	StatusSkipped Status = "skipped"
	StatusError   Status = "error" // the figure could not be measured
)

// Goal bounds one value of a row: the ratio or drover's own figure.
type Goal struct {
	// Of names the bounded value: "ratio" or "drover".
	Of string `json:"of"`
	// Op is ">=" or "<=".
	Op    string  `json:"op"`
	Limit float64 `json:"limit"`
	// Unit is shown after the limit ("×", "MiB", "ms").
	Unit string `json:"unit,omitempty"`
}

// RatioAtLeast is the goal ratio ≥ limit.
func RatioAtLeast(limit float64) Goal { return Goal{Of: "ratio", Op: ">=", Limit: limit, Unit: "×"} }

// RatioAtMost is the goal ratio ≤ limit.
func RatioAtMost(limit float64) Goal { return Goal{Of: "ratio", Op: "<=", Limit: limit, Unit: "×"} }

// DroverAtMost is the goal that drover's own value is ≤ limit (in unit).
func DroverAtMost(limit float64, unit string) Goal {
	return Goal{Of: "drover", Op: "<=", Limit: limit, Unit: unit}
}

// DroverAtLeast is the goal that drover's own value is ≥ limit (in unit).
func DroverAtLeast(limit float64, unit string) Goal {
	return Goal{Of: "drover", Op: ">=", Limit: limit, Unit: unit}
}

func (g Goal) String() string {
	op := "≥"
	if g.Op == "<=" {
		op = "≤"
	}
	if g.Of == "ratio" {
		return op + " " + formatNumber(g.Limit) + "×"
	}
	return strings.TrimSpace(op + " " + formatNumber(g.Limit) + " " + g.Unit)
}

// Met reports whether r meets the goal.
func (g Goal) Met(r Row) bool {
	v := r.Drover
	if g.Of == "ratio" {
		v = r.Ratio
	}
	if math.IsNaN(v) {
		return false
	}
	if g.Op == "<=" {
		return v <= g.Limit
	}
	return v >= g.Limit
}

// Row is one line of the table.
type Row struct {
	// Figure names the figure ("P1"); a figure with several goals has one row for each ("P1 rss").
	Figure string `json:"figure"`
	// What says what is measured.
	What string `json:"what"`
	// Unit is the unit of Baseline and Drover ("s", "MiB", "ms").
	Unit string `json:"unit,omitempty"`
	// Baseline and Drover are medians over the runs.
	Baseline float64 `json:"baseline"`
	Drover   float64 `json:"drover"`
	// Ratio is what the goal of a ratio bounds, the median of the ratios of the interleaved pairs:
	// a speed-up (baseline ÷ drover, bounded from below) for throughput figures such as P1, a
	// slowdown (drover ÷ baseline, bounded from above) for latencies; 0 when the row has no ratio.
	Ratio  float64 `json:"ratio,omitempty"`
	Runs   int     `json:"runs,omitempty"`
	Goal   Goal    `json:"goal"`
	Status Status  `json:"status"`
	// Note gives the reason of a skip or an error, or a detail of the measurement.
	Note string `json:"note,omitempty"`
}

// Judge sets r.Status from its goal.
func (r *Row) Judge() {
	if r.Goal.Met(*r) {
		r.Status = StatusPass
	} else {
		r.Status = StatusFail
	}
}

// Env is what figures share: where the repository is, where to put what they build, and how many
// times to run.
type Env struct {
	// Root is the repository's root folder.
	Root string
	// Dir is a scratch folder for this run: builds, corpora, outputs.
	Dir string
	// Quick asks for small inputs and few runs: the machinery is checked, the goals only reported.
	Quick bool
	// Runs is the number of interleaved (baseline, drover) pairs per figure.
	Runs int
	// GoEnv is the environment of the go commands that build binaries (the caller's environment;
	// this package reads none).
	GoEnv []string
	// Log receives progress lines. Nil means silent.
	Log io.Writer
}

// Logf writes a progress line.
func (e *Env) Logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

// Figure is one entry of the table.
type Figure struct {
	// ID names the figure ("P1") for filters and the table.
	ID string
	// What says what is measured, for rows that are skipped or fail to measure.
	What string
	// Goal is the figure's main goal, for the same rows.
	Goal Goal
	// Measure builds what the figure needs and measures it. It returns the figure's rows with their
	// values; the runner judges them against their goals.
	Measure func(ctx context.Context, env *Env) ([]Row, error)
}

// Config configures Run.
type Config struct {
	// Figures to run, in the order of the table.
	Figures []Figure
	// Only, when not empty, lists the IDs of the figures to run; the others get a skipped row.
	Only []string
	// Env is handed to every figure. Required.
	Env *Env
}

// Report is the outcome of a run: what the table shows and the JSON file holds.
type Report struct {
	Started   time.Time `json:"started"`
	Quick     bool      `json:"quick"`
	GoVersion string    `json:"go_version,omitempty"`
	Platform  string    `json:"platform,omitempty"`
	CPUs      int       `json:"cpus,omitempty"`
	Rows      []Row     `json:"rows"`
}

// Run measures every figure of cfg and returns the report. A figure that fails to measure gives an
// error row; Run itself fails only when ctx ends.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Env == nil {
		return Report{}, errors.New("bench: Config.Env is required")
	}
	rep := Report{Quick: cfg.Env.Quick}
	for _, f := range cfg.Figures {
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, f.ID) {
			rep.Rows = append(rep.Rows, Row{Figure: f.ID, What: f.What, Goal: f.Goal, Status: StatusSkipped,
				Note: "skipped: not selected by -only"})
			continue
		}
		cfg.Env.Logf("measuring %s: %s", f.ID, f.What)
		rows, err := f.Measure(ctx, cfg.Env)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return rep, fmt.Errorf("measuring %s: %w", f.ID, ctxErr)
		}
		if err != nil {
			rep.Rows = append(rep.Rows, Row{Figure: f.ID, What: f.What, Goal: f.Goal, Status: StatusError, Note: err.Error()})
			continue
		}
		for i := range rows {
			rows[i].Judge()
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	return rep, nil
}

// Failed reports whether a row missed its goal or could not be measured. In quick mode missed goals
// do not count: only errors do.
func (r Report) Failed() bool {
	for _, row := range r.Rows {
		if row.Status == StatusError || row.Status == StatusFail && !r.Quick {
			return true
		}
	}
	return false
}

// WriteTable prints the rows as an aligned table.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmeasured\tbaseline\tdrover\tratio\tgoal\tresult")
	for _, row := range r.Rows {
		base, drover, ratio := "-", "-", "-"
		if row.Status != StatusSkipped && row.Status != StatusError {
			drover = formatValue(row.Drover, row.Unit)
			if row.Baseline != 0 {
				base = formatValue(row.Baseline, row.Unit)
			}
			if row.Ratio != 0 {
				ratio = fmt.Sprintf("%.2f×", row.Ratio)
			}
		}
		result := string(row.Status)
		if row.Status == StatusFail && r.Quick {
			result = "miss (quick run: not enforced)"
		}
		if row.Status == StatusSkipped || row.Status == StatusError {
			result = strings.TrimPrefix(row.Note, "skipped: ")
			result = string(row.Status) + ": " + result
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Figure, row.What, base, drover, ratio, row.Goal, result)
	}
	if r.Quick {
		fmt.Fprintln(tw, "\t(quick run: small inputs, few runs; goals are reported, not enforced)\t\t\t\t\t")
	}
	return tw.Flush()
}

// WriteJSON writes the report to path, indented.
func (r Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

func formatValue(v float64, unit string) string {
	s := formatNumber(v)
	if unit != "" {
		s += " " + unit
	}
	return s
}

// formatNumber prints v with three significant digits, without trailing zeros.
func formatNumber(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
	case a >= 1:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	default:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
	}
}
