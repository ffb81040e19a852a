package router

// Standbys lists the groups whose agent is started ahead and waiting for
// its first prompt (warm.go), for `nanoclawd status`.
func (r *Router) Standbys() map[string]bool {
	r.warm.mu.Lock()
	defer r.warm.mu.Unlock()
	out := make(map[string]bool, len(r.warm.waiting))
	for folder := range r.warm.waiting {
		out[folder] = true
	}
	return out
}
