package router

// Standbys returns, for each group whose agent is started ahead and
// waiting for its first prompt (warm.go), a value that identifies that
// standby: compare two calls' values with == to see whether it was taken.
func (r *Router) Standbys() map[string]any {
	r.warm.mu.Lock()
	defer r.warm.mu.Unlock()
	out := make(map[string]any, len(r.warm.waiting))
	for folder, sb := range r.warm.waiting {
		out[folder] = sb
	}
	return out
}
