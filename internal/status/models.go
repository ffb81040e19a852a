package status

// modelSection writes each group's model and provider, and which groups a
// fallback serves.
func modelSection(p func(string, ...any), r Report) {
	if len(r.Groups) == 0 {
		return
	}
	p("\nModels ('nanoclawd groups set-model' or /model sets a group's)")
	p("  GROUP\tMODEL\tPROVIDER\tSERVED BY")
	for _, g := range r.Groups {
		model := g.Model
		if model == "" {
			model = "the SDK's default"
		}
		served := "its chosen model"
		if f := g.Fallback; f != nil {
			served = "fallback " + f.Upstream + " since " + f.Since.In(r.Time.Location()).Format("2006-01-02 15:04") + " (" + ago(r.Time, f.Since) + " ago)"
		}
		p("  %s\t%s\t%s\t%s", g.Folder, model, g.Provider, served)
	}
}
