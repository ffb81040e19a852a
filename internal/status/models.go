package status

import "github.com/nanoclawd/nanoclawd/internal/fit"

// modelSection writes each group's model and provider, and which groups a
// fallback serves.
func modelSection(t *text, r Report) {
	if len(r.Groups) == 0 {
		return
	}
	t.line("\nModels ('nanoclawd groups set-model' or /model sets a group's)")
	rows := [][]string{{"GROUP", "MODEL", "PROVIDER", "SERVED BY"}}
	for _, g := range r.Groups {
		model := g.Model
		if model == "" {
			model = "the SDK's default"
		}
		served := "its chosen model"
		if f := g.Fallback; f != nil {
			served = "fallback " + f.Upstream + " for " + ago(r.Time, f.Since)
		}
		rows = append(rows, []string{g.Folder, fit.Cut(model, 32), g.Provider, served})
	}
	t.table(rows...)
}
