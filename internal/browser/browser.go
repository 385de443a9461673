// Package browser drives a headless Chromium through the DevTools protocol (chromedp), for the
// web console's browser tests and benchmark. A Browser is one Chromium process with a throwaway
// profile; each Page is a tab that records what a test must see: JavaScript dialogs (dismissed at
// once), uncaught exceptions and console errors. Close ends the process; no exit path leaves it
// behind.
package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Config configures a Browser.
type Config struct {
	// Bin is the Chromium executable (tools.ChromiumBin). Required.
	Bin string
	// Width and Height are the window's size. Default to 1280×900.
	Width, Height int
	// Logger receives the browser's own errors; nil means silent.
	Logger *slog.Logger
}

// Browser is one headless Chromium process.
type Browser struct {
	ctx     context.Context // the browser's first tab: it keeps the process
	cancel  context.CancelFunc
	profile string
	log     *slog.Logger
}

// Start launches Chromium. The process ends when Close is called or ctx ends.
func Start(ctx context.Context, cfg Config) (*Browser, error) {
	if cfg.Bin == "" {
		return nil, errors.New("starting chromium: no executable given")
	}
	if cfg.Width == 0 {
		cfg.Width, cfg.Height = 1280, 900
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	profile, err := os.MkdirTemp("", "drover-chromium-")
	if err != nil {
		return nil, fmt.Errorf("starting chromium: %w", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(cfg.Bin),
		chromedp.UserDataDir(profile),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(cfg.Width, cfg.Height),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(f string, a ...any) {
		log.Error("chromium", "error", fmt.Sprintf(f, a...))
	}))
	b := &Browser{ctx: bctx, profile: profile, log: log, cancel: func() { bcancel(); allocCancel() }}
	if err := chromedp.Do(bctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("starting chromium %s: %w", cfg.Bin, err)
	}
	return b, nil
}

// Close ends the browser process and removes its profile.
func (b *Browser) Close() {
	b.cancel()
	_ = os.RemoveAll(b.profile)
}

// Page is one tab.
type Page struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu       sync.Mutex
	dialogs  []string
	console  []chromedp.ConsoleMessage
	requests []string
}

// NewPage opens a tab. Its actions run until Close or until ctx ends.
func (b *Browser) NewPage(ctx context.Context) (*Page, error) {
	tctx, tcancel := chromedp.NewContext(b.ctx)
	stop := context.AfterFunc(ctx, tcancel)
	p := &Page{ctx: tctx}
	p.cancel = func() { stop(); tcancel(); p.done.Wait() }
	if err := chromedp.Do(tctx, chromedp.Navigate("about:blank")); err != nil {
		p.Close()
		return nil, fmt.Errorf("opening a tab: %w", err)
	}
	dialogs := chromedp.Events(tctx, page.JavascriptDialogOpening)
	messages := chromedp.Console(tctx)
	sent := chromedp.Events(tctx, network.RequestWillBeSent)
	p.done.Add(3)
	go func() {
		defer p.done.Done()
		for ev, err := range sent {
			if err != nil {
				return
			}
			if ev.Request != nil {
				p.mu.Lock()
				p.requests = append(p.requests, ev.Request.Method+" "+ev.Request.URL)
				p.mu.Unlock()
			}
		}
	}()
	go func() {
		defer p.done.Done()
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.dialogs = append(p.dialogs, string(ev.Type)+": "+ev.Message)
			p.mu.Unlock()
			_, _ = chromedp.Call(tctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	go func() {
		defer p.done.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.console = append(p.console, m)
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// Do runs actions that return nothing in the tab.
func (p *Page) Do(actions ...chromedp.Action[chromedp.Void]) error {
	return chromedp.Do(p.ctx, actions...)
}

// Context is the tab's context, for chromedp.Run and chromedp.Call.
func (p *Page) Context() context.Context { return p.ctx }

// Eval evaluates a JavaScript expression in the page (awaiting a promise) and decodes its
// JSON-able result into T.
func Eval[T any](p *Page, expr string) (T, error) {
	return chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// Dialogs returns the JavaScript dialogs (alert, confirm, prompt) the page opened.
func (p *Page) Dialogs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.dialogs...)
}

// Requests returns every HTTP request the tab sent, as "METHOD URL", in order: what the browser
// itself reports (DevTools' Network.requestWillBeSent).
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// Problems returns what the page reported as wrong: uncaught exceptions, console errors and
// warnings, and the browser's own errors (a refused resource, a Content-Security-Policy
// violation).
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.console {
		switch m.Type {
		case chromedp.ConsoleException, "error", "warning", "assert":
			out = append(out, fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m.Text))
		}
	}
	return out
}

// HeapUsed returns the page's JavaScript heap in use, in bytes, after a garbage collection.
func (p *Page) HeapUsed() (float64, error) {
	if _, err := chromedp.Call(p.ctx, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		return 0, fmt.Errorf("collecting garbage: %w", err)
	}
	res, err := chromedp.Call(p.ctx, runtime.GetHeapUsage, cdp.Empty{})
	if err != nil {
		return 0, fmt.Errorf("reading heap usage: %w", err)
	}
	return res.UsedSize, nil
}

// Screenshot writes a PNG of what the window shows to path.
func (p *Page) Screenshot(path string) error {
	return p.screenshot(path, chromedp.CaptureScreenshot())
}

// FullScreenshot writes a PNG of the whole page, beyond the window, to path.
func (p *Page) FullScreenshot(path string) error {
	return p.screenshot(path, chromedp.FullScreenshot(100))
}

func (p *Page) screenshot(path string, shot chromedp.Action[[]byte]) error {
	buf, err := chromedp.Run(p.ctx, shot)
	if err != nil {
		return fmt.Errorf("taking a screenshot: %w", err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		return fmt.Errorf("writing screenshot: %w", err)
	}
	return nil
}

// Close closes the tab.
func (p *Page) Close() { p.cancel() }
