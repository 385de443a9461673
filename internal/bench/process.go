package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Sample is one run of a process.
type Sample struct {
	// Wall is the time from start to exit.
	Wall time.Duration
	// MaxRSS is the peak resident set size in bytes, as the kernel reports it (rusage ru_maxrss).
	MaxRSS int64
}

// RunProcess runs cmd to its end and returns its wall time and peak RSS. A non-zero exit is an error
// that carries the end of its standard error when cmd.Stderr is not set.
func RunProcess(cmd *exec.Cmd) (Sample, error) {
	var stderr bytes.Buffer
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		msg := bytes.TrimSpace(stderr.Bytes())
		if len(msg) > 500 {
			msg = msg[len(msg)-500:]
		}
		return Sample{}, fmt.Errorf("running %s: %w: %s", filepath.Base(cmd.Path), err, msg)
	}
	s := Sample{Wall: wall}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.MaxRSS = ru.Maxrss * 1024 // kilobytes on Linux
	}
	return s, nil
}

// Interleave runs baseline and subject n times each, alternating and swapping which goes first from
// one pair to the next, so that a change in the machine's load falls on both.
func Interleave(ctx context.Context, n int, baseline, subject func(context.Context) (Sample, error)) (base, subj []Sample, err error) {
	for i := range n {
		first, second := baseline, subject
		if i%2 == 1 {
			first, second = subject, baseline
		}
		a, err := first(ctx)
		if err != nil {
			return nil, nil, err
		}
		b, err := second(ctx)
		if err != nil {
			return nil, nil, err
		}
		if i%2 == 1 {
			a, b = b, a
		}
		base, subj = append(base, a), append(subj, b)
	}
	return base, subj, nil
}

// Median returns the median of xs (the mean of the two middle values for an even count), or NaN for
// none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// WallRatios returns, pair by pair, the baseline's wall time divided by the subject's.
func WallRatios(base, subj []Sample) []float64 {
	out := make([]float64, 0, min(len(base), len(subj)))
	for i := range min(len(base), len(subj)) {
		if subj[i].Wall > 0 {
			out = append(out, float64(base[i].Wall)/float64(subj[i].Wall))
		}
	}
	return out
}

// Seconds returns the wall times of samples in seconds.
func Seconds(samples []Sample) []float64 {
	out := make([]float64, len(samples))
	for i, s := range samples {
		out[i] = s.Wall.Seconds()
	}
	return out
}

// MiB returns the peak RSS of samples in MiB.
func MiB(samples []Sample) []float64 {
	out := make([]float64, len(samples))
	for i, s := range samples {
		out[i] = float64(s.MaxRSS) / (1 << 20)
	}
	return out
}

// BuildOptions says how to build a binary.
type BuildOptions struct {
	// Shipped builds as the release image does: CGO_ENABLED=0 and -trimpath. Otherwise the build
	// uses the caller's environment as is, and shares the build cache with the tests.
	Shipped bool
}

// Build builds the main package pkg (a path relative to env.Root, such as "./cmd/drover") and
// returns the path of the binary, named name, in env.Dir/bin. The linker's output is copied there
// with ordinary writes, as an installed binary is (a file the linker has just written can be mapped
// by the kernel in large pages, which adds megabytes to the resident set of the process that runs it).
func (e *Env) Build(ctx context.Context, pkg, name string, opts BuildOptions) (string, error) {
	buildDir := filepath.Join(e.Dir, "build")
	binDir := filepath.Join(e.Dir, "bin")
	for _, d := range []string{buildDir, binDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("building %s: %w", pkg, err)
		}
	}
	built := filepath.Join(buildDir, name)
	args := []string{"build", "-o", built}
	env := slices.Clone(e.GoEnv)
	if opts.Shipped {
		args = append(args, "-trimpath")
		env = append(env, "CGO_ENABLED=0")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = e.Root
	cmd.Env = env
	e.Logf("go %v", cmd.Args[1:])
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w: %s", pkg, err, bytes.TrimSpace(out))
	}
	bin := filepath.Join(binDir, name)
	if err := copyFile(bin, built); err != nil {
		return "", fmt.Errorf("building %s: %w", pkg, err)
	}
	return bin, nil
}

// copyFile copies the executable src to dst.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_ = os.Remove(dst)
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(struct{ io.Writer }{out}, in); err != nil { // plain writes, no file-range copy
		_ = out.Close()
		return err
	}
	return out.Close()
}

// DevNull opens the null device for a process's standard output.
func DevNull() (*os.File, error) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the null device: %w", err)
	}
	return f, nil
}
