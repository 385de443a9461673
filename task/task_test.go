package task

import "testing"

func TestQueuesOfAHost(t *testing.T) {
	t.Parallel()
	host := HostQueue("host-a")
	if id, ok := HostOfQueue(host); !ok || id != "host-a" {
		t.Errorf("HostOfQueue(%q) = %q, %v", host, id, ok)
	}
	control := ControlQueue(host)
	if control == host {
		t.Fatalf("the control queue is the host's queue %q: turns would fill it", host)
	}
	for _, q := range []string{control, SharedQueue, "executor/", "other/host-a"} {
		if id, ok := HostOfQueue(q); ok {
			t.Errorf("HostOfQueue(%q) = %q: not a host's turn queue", q, id)
		}
	}
}
