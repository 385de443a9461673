// Package faultproxy is a TCP proxy on loopback that puts a network fault between a client and
// a server (Postgres, the Temporal frontend, any TCP service), so that a test meets the fault as
// the client's own network stack would:
//
//   - SetLatency delays every byte, both ways, by a fixed time (a slow link; order is kept);
//   - Reset breaks every open connection with a TCP reset (new connections go through);
//   - Blackhole makes the link silent: nothing is forwarded and nothing is closed, on open
//     connections and on those opened meanwhile, until Heal; what the ends sent meanwhile then
//     flows on in order, as TCP's retransmissions deliver it when a partition ends.
//
// The proxy forwards bytes and knows no protocol.
package faultproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards connections to one target through the fault it is set to. Make one with New.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	latency   time.Duration
	blackhole bool
	links     map[*link]struct{}
	accepted  int
	held      int // chunks and connections the fault held back
	wg        sync.WaitGroup
}

// chunk is what one read of a connection got, and when.
type chunk struct {
	b  []byte
	at time.Time
}

// link is one client connection and its connection to the target. Each direction has a reader,
// which queues what its source sends, and a forwarder, which writes the queue on when the
// proxy's fault lets it.
type link struct {
	conns  [2]net.Conn // the client, the target
	queue  [2][]chunk  // by direction: 0 client → target, 1 target → client
	eof    [2]bool
	late   [2]bool // the direction's next chunk waited for the fault
	wake   [2]chan struct{}
	closed bool
}

// New starts a proxy to target (host:port) on loopback, stopped when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port, the address to hand the client instead of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays what is forwarded, both ways, by d from when the proxy read it (0: none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
	p.wakeLocked()
}

// Reset breaks every open connection with a TCP reset, to the client and to the target, and
// returns how many it broke. Connections opened afterwards go through.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for l := range p.links {
		for _, c := range l.conns {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close sends RST
			}
		}
		p.closeLocked(l)
		n++
	}
	return n
}

// Blackhole stops forwarding on every connection, open or opened until Heal, keeping them open.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
}

// Heal ends a blackhole and removes the latency: what was held flows on, in order.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = false
	p.latency = 0
	p.wakeLocked()
}

// Accepted is how many connections the proxy has accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Held is how many chunks of bytes (and new connections) a latency or a blackhole has held back
// so far: a test's evidence that the fault met traffic.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Open is how many connections are open through the proxy now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

func (p *Proxy) wakeLocked() {
	for l := range p.links {
		for _, w := range l.wake {
			poke(w)
		}
	}
}

func poke(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

func (p *Proxy) closeLocked(l *link) {
	if l.closed {
		return
	}
	l.closed = true
	for i, c := range l.conns {
		if c != nil {
			_ = c.Close()
		}
		poke(l.wake[i])
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(c net.Conn) {
	l := &link{wake: [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}}
	l.conns[0] = c
	p.mu.Lock()
	p.accepted++
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.closeLocked(l)
		delete(p.links, l)
		p.mu.Unlock()
	}()
	// A blackhole holds a new connection before the target hears of it.
	if !p.waitOpen(l) {
		return
	}
	up, err := net.Dial("tcp", p.target)
	p.mu.Lock()
	if err != nil || l.closed {
		p.mu.Unlock()
		if err == nil {
			_ = up.Close()
		}
		return
	}
	l.conns[1] = up
	p.mu.Unlock()
	var wg sync.WaitGroup
	for dir := range 2 {
		wg.Go(func() { p.read(l, dir) })
		wg.Go(func() { p.forward(l, dir) })
	}
	wg.Wait()
}

// waitOpen waits while the proxy is a blackhole; false when l was closed meanwhile. A connection
// that must wait counts as held.
func (p *Proxy) waitOpen(l *link) bool {
	for first := true; ; first = false {
		p.mu.Lock()
		hole, closed := p.blackhole, l.closed
		if hole && first {
			p.held++
		}
		p.mu.Unlock()
		switch {
		case closed:
			return false
		case !hole:
			return true
		}
		select {
		case <-l.wake[0]:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// read queues what the source of direction dir of l sends, until it ends.
func (p *Proxy) read(l *link, dir int) {
	src := l.conns[dir]
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		p.mu.Lock()
		if n > 0 {
			l.queue[dir] = append(l.queue[dir], chunk{b: buf[:n], at: time.Now()})
		}
		if err != nil {
			l.eof[dir] = true
		}
		closed := l.closed
		p.mu.Unlock()
		poke(l.wake[dir])
		if err != nil || closed {
			return
		}
	}
}

// forward writes direction dir of l on, each chunk once the latency has passed since it was
// read and no blackhole holds it. When the source has ended and its queue is written, l closes.
func (p *Proxy) forward(l *link, dir int) {
	dst := l.conns[1-dir]
	for {
		p.mu.Lock()
		if l.closed {
			p.mu.Unlock()
			return
		}
		if l.eof[dir] && len(l.queue[dir]) == 0 {
			p.closeLocked(l)
			p.mu.Unlock()
			return
		}
		wait := time.Duration(-1) // until woken
		if p.blackhole && len(l.queue[dir]) > 0 {
			p.holdLocked(l, dir)
		}
		if !p.blackhole && len(l.queue[dir]) > 0 {
			c := l.queue[dir][0]
			if wait = time.Until(c.at.Add(p.latency)); wait <= 0 {
				l.late[dir] = false
				l.queue[dir] = l.queue[dir][1:]
				p.mu.Unlock()
				if _, err := dst.Write(c.b); err != nil {
					p.mu.Lock()
					p.closeLocked(l)
					p.mu.Unlock()
					return
				}
				continue
			}
			p.holdLocked(l, dir)
		}
		p.mu.Unlock()
		p.sleep(l.wake[dir], wait)
	}
}

// holdLocked counts the next chunk of direction dir of l as held, once.
func (p *Proxy) holdLocked(l *link, dir int) {
	if !l.late[dir] {
		l.late[dir] = true
		p.held++
	}
}

// sleep waits for a wake-up, or for d when d is not negative.
func (p *Proxy) sleep(wake chan struct{}, d time.Duration) {
	if d < 0 {
		<-wake
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.blackhole = false
	for l := range p.links {
		p.closeLocked(l)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
