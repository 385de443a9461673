package pgtest

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Proxy is a TCP proxy on loopback in front of Postgres that a test cuts, holds and restores, so
// that an outage is real:
//
//   - Cut breaks every open connection and turns new ones away until Restore;
//   - Hold stops forwarding on every connection, open or new, while keeping them open, until
//     Release: the client's queries wait as if the server hung;
//   - HoldAt holds one connection at one message of the client's (a "commit", say), either
//     before Postgres sees it or once Postgres has it and before its answer gets back.
//
// A client that goes away while its connection is held loses what was held: the proxy closes
// the connection to Postgres without sending it, as a broken network would.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	cut     bool
	holdAll bool
	trigger *holdTrigger
	refused int
	links   map[*link]struct{}
	wg      sync.WaitGroup
}

// Direction is a way traffic flows through the proxy.
type Direction int

// The two directions of a connection.
const (
	// ToServer is what the client sends to Postgres.
	ToServer Direction = iota
	// ToClient is what Postgres answers.
	ToClient
)

// HoldMode says where HoldAt stops the connection that sends the awaited message.
type HoldMode int

const (
	// HoldBefore keeps the message from Postgres: Postgres never sees it before Release.
	HoldBefore HoldMode = iota
	// HoldReplies sends the message to Postgres and holds what Postgres answers on that
	// connection: Postgres acts on it, the client never learns it did before Release.
	HoldReplies
)

// holdTrigger is an armed HoldAt.
type holdTrigger struct {
	msg   []byte
	mode  HoldMode
	fired chan struct{}
}

// link is one client connection and its connection to Postgres. Each direction has a reader,
// which queues what its source sends, and a forwarder, which writes the queue on unless the
// direction is held; both wait on the proxy's cond, under its lock.
type link struct {
	client, server net.Conn
	queue          [2][][]byte // by Direction
	eof            [2]bool     // the direction's source ended
	held           [2]bool
	closed         bool
}

func (p *Proxy) closeLocked(l *link) {
	if l.closed {
		return
	}
	l.closed = true
	_ = l.client.Close()
	_ = l.server.Close()
	p.cond.Broadcast()
}

// NewProxy starts a proxy to target (host:port), stopped when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
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
	for l := range p.links {
		p.closeLocked(l)
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Refused is how many connections the proxy turned away while it was cut.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Hold stops forwarding, both ways, on every connection (those opened later too) until
// Release. Connections stay open; what their ends send waits in the proxy.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdAll = true
}

// HoldAt arms a one-shot hold: the first connection whose client sends msg (a whole frontend
// message, such as SimpleQuery("commit")) stops as mode says until Release, and the returned
// channel is closed — for HoldReplies, once msg has been written to Postgres. Other connections
// go on. Arming again replaces a trigger that has not fired.
func (p *Proxy) HoldAt(msg []byte, mode HoldMode) <-chan struct{} {
	t := &holdTrigger{msg: bytes.Clone(msg), mode: mode, fired: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trigger = t
	return t.fired
}

// Release ends Hold and every hold HoldAt set, and disarms a trigger that has not fired: held
// traffic flows on, in order.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdAll = false
	p.trigger = nil
	for l := range p.links {
		l.held = [2]bool{}
	}
	p.cond.Broadcast()
}

// SimpleQuery is the frontend message of a simple query: how pgx sends statements without
// arguments, such as the "begin" and "commit" of a transaction.
func SimpleQuery(sql string) []byte {
	msg := make([]byte, 0, 6+len(sql))
	msg = append(msg, 'Q')
	msg = binary.BigEndian.AppendUint32(msg, uint32(4+len(sql)+1))
	msg = append(msg, sql...)
	return append(msg, 0)
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.refused++
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
	l := &link{client: c, server: up}
	p.mu.Lock()
	if p.cut {
		p.refused++
		p.closeLocked(l)
		p.mu.Unlock()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, dir := range []Direction{ToServer, ToClient} {
		wg.Go(func() { p.read(l, dir) })
		wg.Go(func() { p.forward(l, dir) })
	}
	wg.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// read queues what the source of one direction of l sends, until it ends.
func (p *Proxy) read(l *link, dir Direction) {
	src := l.client
	if dir == ToClient {
		src = l.server
	}
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		p.mu.Lock()
		if n > 0 {
			l.queue[dir] = append(l.queue[dir], buf[:n])
		}
		if err != nil {
			l.eof[dir] = true
		}
		p.cond.Broadcast()
		closed := l.closed
		p.mu.Unlock()
		if err != nil || closed {
			return
		}
	}
}

// forward writes one direction of l on while it is not held. When its source has ended, what
// it still holds is dropped and l is closed: a client that went away loses its held messages.
func (p *Proxy) forward(l *link, dir Direction) {
	dst := l.server
	if dir == ToClient {
		dst = l.client
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		held := l.held[dir] || p.holdAll
		switch {
		case l.closed:
			return
		case l.eof[dir] && (held || len(l.queue[dir]) == 0):
			p.closeLocked(l)
			return
		case held || len(l.queue[dir]) == 0:
			p.cond.Wait()
			continue
		}
		chunk := l.queue[dir][0]
		var fired chan struct{}
		if t := p.trigger; t != nil && dir == ToServer && bytes.Contains(chunk, t.msg) {
			p.trigger = nil
			if t.mode == HoldBefore {
				l.held[ToServer] = true
				close(t.fired)
				continue
			}
			// Held before the message leaves, so that no answer to it can slip through.
			l.held[ToClient] = true
			fired = t.fired
		}
		l.queue[dir] = l.queue[dir][1:]
		p.mu.Unlock()
		_, err := dst.Write(chunk)
		if fired != nil {
			close(fired)
		}
		p.mu.Lock()
		if err != nil {
			p.closeLocked(l)
			return
		}
	}
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
