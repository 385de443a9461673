package activities

import "sync"

// registry holds the CLI process serving each task on this host.
type registry struct {
	mu    sync.Mutex
	execs map[string]*executor
}

func newRegistry() *registry { return &registry{execs: make(map[string]*executor)} }

func (r *registry) get(taskID string) *executor {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.execs[taskID]
}

// put stores ex for its task and returns the executor it replaces, if any.
func (r *registry) put(ex *executor) *executor {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.execs[ex.taskID]
	r.execs[ex.taskID] = ex
	if old == ex {
		return nil
	}
	return old
}

func (r *registry) remove(taskID string) *executor {
	r.mu.Lock()
	defer r.mu.Unlock()
	ex := r.execs[taskID]
	delete(r.execs, taskID)
	return ex
}

// removeIf removes ex only if it still serves its task.
func (r *registry) removeIf(ex *executor) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.execs[ex.taskID] != ex {
		return false
	}
	delete(r.execs, ex.taskID)
	return true
}

func (r *registry) drain() []*executor {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*executor, 0, len(r.execs))
	for id, ex := range r.execs {
		out = append(out, ex)
		delete(r.execs, id)
	}
	return out
}

func (r *registry) all() []*executor {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*executor, 0, len(r.execs))
	for _, ex := range r.execs {
		out = append(out, ex)
	}
	return out
}

func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.execs)
}
