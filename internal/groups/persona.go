package groups

import (
	"bytes"
	"embed"
	"path/filepath"
	"text/template"
)

// MemoryFile is a group's memory and persona, in its folder; the one in
// GlobalFolder is shared by every group.
const (
	MemoryFile   = "CLAUDE.md"
	GlobalFolder = "global"
)

//go:embed templates/*.md
var templatesFS embed.FS

var personas = template.Must(template.ParseFS(templatesFS, "templates/*.md"))

// Persona is the starter CLAUDE.md of g: who the assistant is, how to
// write for WhatsApp, <internal>, send_message, and for the main group how
// to manage chats and tasks with the nanoclaw tools.
func (r *Registry) Persona(g Group) ([]byte, error) {
	name := "group.md"
	if g.IsMain {
		name = "main.md"
	}
	trigger := g.Trigger
	if trigger == "" {
		trigger = "@" + r.assistant
	}
	var b bytes.Buffer
	err := personas.ExecuteTemplate(&b, name, map[string]string{
		"Assistant":    r.assistant,
		"Name":         g.Name,
		"Trigger":      trigger,
		"GlobalMemory": r.GlobalMemory(),
	})
	return b.Bytes(), err
}

// GlobalMemory is the path of the memory shared by every group.
func (r *Registry) GlobalMemory() string {
	return filepath.Join(r.groupsDir, GlobalFolder, MemoryFile)
}
