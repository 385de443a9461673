package pgtest

import (
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Proxy is a TCP proxy on loopback in front of Postgres that a test cuts and restores, so that
// an outage is real: Cut breaks every open connection and turns new ones away until Restore.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port), stopped when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DSN returns dsn (a postgres:// URL or a key=value list) pointed at the proxy.
func (p *Proxy) DSN(dsn string) string {
	host, port, _ := net.SplitHostPort(p.Addr())
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = p.Addr()
		return u.String()
	}
	return dsn + " host=" + host + " port=" + port
}

// Cut breaks every connection through the proxy and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Go(func() { pipe(up, c) })
	wg.Go(func() { pipe(c, up) })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// AdminAddr is the host:port of the Postgres server tests use.
func AdminAddr() string {
	cfg, err := pgx.ParseConfig(AdminURL())
	if err != nil {
		return "127.0.0.1:5432"
	}
	host := cfg.Host
	if strings.HasPrefix(host, "/") {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(int(cfg.Port)))
}
