package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/faultproxy"
)

// echo starts a server that writes back each line it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *faultproxy.Proxy) client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return client{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and reads its echo.
func (c client) roundTrip(line string) (string, error) {
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return c.r.ReadString('\n')
}

func TestForwardsAndDelays(t *testing.T) {
	p := faultproxy.New(t, echo(t))
	c := dial(t, p)
	if got, err := c.roundTrip("hello"); err != nil || got != "hello\n" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	// With latency, the echo does not come back before the delay has passed twice, once each way.
	p.SetLatency(300 * time.Millisecond)
	if _, err := c.c.Write([]byte("slow\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.r.ReadString('\n'); !errors.Is(err, syscall.ETIMEDOUT) && !isTimeout(err) {
		t.Fatalf("the echo came back through a 300 ms latency at once: %v", err)
	}
	_ = c.c.SetReadDeadline(time.Time{})
	if got, err := c.r.ReadString('\n'); err != nil || got != "slow\n" {
		t.Fatalf("the delayed echo: %q, %v", got, err)
	}
	if p.Held() != 2 {
		t.Fatalf("Held = %d after one round trip through latency, want 2", p.Held())
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestResetBreaksOpenConnections(t *testing.T) {
	p := faultproxy.New(t, echo(t))
	c := dial(t, p)
	if _, err := c.roundTrip("one"); err != nil {
		t.Fatal(err)
	}
	if n := p.Reset(); n != 1 {
		t.Fatalf("Reset broke %d connections, want 1", n)
	}
	if _, err := c.r.ReadString('\n'); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading after a reset: %v, want ECONNRESET", err)
	}
	// A new connection goes through.
	if got, err := dial(t, p).roundTrip("two"); err != nil || got != "two\n" {
		t.Fatalf("after the reset: %q, %v", got, err)
	}
}

func TestBlackholeHoldsUntilHeal(t *testing.T) {
	p := faultproxy.New(t, echo(t))
	old := dial(t, p)
	if _, err := old.roundTrip("before"); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	fresh := dial(t, p)
	for _, c := range []client{old, fresh} {
		if _, err := c.c.Write([]byte("held\n")); err != nil {
			t.Fatal(err)
		}
		_ = c.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if got, err := c.r.ReadString('\n'); !isTimeout(err) {
			t.Fatalf("through a blackhole: %q, %v", got, err)
		}
		_ = c.c.SetReadDeadline(time.Time{})
	}
	p.Heal()
	for _, c := range []client{old, fresh} {
		if got, err := c.r.ReadString('\n'); err != nil || got != "held\n" {
			t.Fatalf("after the heal: %q, %v", got, err)
		}
	}
	if p.Held() < 2 || p.Accepted() != 2 || p.Open() != 2 {
		t.Fatalf("held %d, accepted %d, open %d; want at least 2, 2 and 2", p.Held(), p.Accepted(), p.Open())
	}
}
