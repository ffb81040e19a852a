// Package layout names every file and directory nanoclawd keeps on disk:
// the data dir (the daemon's state, the IPC tree, agent sessions) and the
// groups dir (one folder per group). No other package spells one of these
// names; the sandbox's view of the daemon's state is derived from
// StateFiles, so a state file added here is hidden from agents too.
//
//	<dataDir>/
//	  nanoclaw.db(-wal,-shm)     the daemon's SQLite database
//	  whatsapp.db(-wal,-shm)     WhatsApp's session (whatsmeow's own store)
//	  whatsapp.version           the last WhatsApp Web version WhatsApp accepted
//	  whatsapp.status.json       the running daemon's WhatsApp connection state
//	  backup.last.json           when the last backup ran, where it went, and how it ended
//	  backups/                   archives of 'nanoclawd backup' when backup.dir is not set (0700)
//	  nanoclawd.lock             one daemon per data dir (flock, holds the PID)
//	  control.sock               what `nanoclawd status` asks
//	  groups.changed             touched by the CLI after it changes the registry
//	  logs/nanoclawd.log         the daemon's log (rotated)
//	  logs/disk.reserve          space held back for a full disk (zeros)
//	  gw/<random>.sock           the gateway socket of each confined run (the next start removes a killed daemon's)
//	  placeholders/              empty mount points kept between confined runs (sandbox.Placeholders)
//	  ipc/errors/                refused IPC files, with the reason beside each
//	  ipc/<folder>/              the group's IPC directory (NANOCLAW_IPC_DIR)
//	    messages/ tasks/         requests from the agent's MCP tools
//	    results/                 the daemon's verdict on each request
//	    input/                   follow-up messages to a running agent; input/_close ends it
//	    current_tasks.json       snapshots the MCP tools read
//	    available_groups.json
//	  sessions/<folder>/         the agent's Claude session (home/ = a confined run's HOME)
//	  outgoing/                  the daemon's copies of files agents send, until sent
//	<groupsDir>/
//	  global/CLAUDE.md           memory shared by every group
//	  <folder>/                  the group's folder, its agent's working directory
//	    CLAUDE.md                its memory
//	    logs/                    run logs and security.jsonl (the daemon's, read-only to the agent)
//	    media/                   images received in the group's chat
//
// Everything here is a pure function of the two directories.
package layout

import (
	"fmt"
	"path/filepath"
	"strings"
)

// EnvFile, beside the config file, holds secrets (NAME=value lines) that
// `nanoclawd run` reads at start and a service manager loads; no confined
// agent may read it.
const EnvFile = "nanoclawd.env"

// Defaults of dataDir, groupsDir and channels.local.socket, relative to
// the config file's directory.
const (
	DefaultDataDir     = "data"
	DefaultGroupsDir   = "groups"
	DefaultLocalSocket = DefaultDataDir + "/local.sock"
)

// Names inside a group's folder and inside an IPC directory, for code that
// holds only that directory (an agent knows its NANOCLAW_IPC_DIR, not the
// data dir).
const (
	LogsDir        = "logs" // the daemon's files in a group's folder (and in the data dir)
	MemoryFile     = "CLAUDE.md"
	MediaDir       = "media"  // images received in the group's chat
	GlobalFolder   = "global" // beside the groups' folders: the memory every group shares
	MessagesDir    = "messages"
	TasksDir       = "tasks"
	ResultsDir     = "results"
	InputDir       = "input"
	CloseFile      = "_close"
	SessionHomeDir = "home"   // a confined run's HOME, in its session directory
	ErrorsDir      = "errors" // beside the groups' IPC directories
	TasksSnapshot  = "current_tasks.json"
	GroupsSnapshot = "available_groups.json"
)

// Layout is the on-disk layout of one installation. Both directories are
// absolute (config.Load makes them so).
type Layout struct {
	DataDir   string
	GroupsDir string
}

// New is the layout of an installation with these directories.
func New(dataDir, groupsDir string) Layout { return Layout{DataDir: dataDir, GroupsDir: groupsDir} }

// DB is the daemon's SQLite database.
func (l Layout) DB() string { return l.data("nanoclaw.db") }

// WhatsAppDB is whatsmeow's store (WhatsApp's session), a SQLite file of its own.
func (l Layout) WhatsAppDB() string { return l.data("whatsapp.db") }

// WhatsAppVersion holds the WhatsApp Web version of the last connection
// WhatsApp accepted.
func (l Layout) WhatsAppVersion() string { return l.data("whatsapp.version") }

// WhatsAppStatus holds the running daemon's WhatsApp connection state, for
// the CLI.
func (l Layout) WhatsAppStatus() string { return l.data("whatsapp.status.json") }

// LastBackup records the last backup's time, archive and result, for
// `nanoclawd status` and the daily summary.
func (l Layout) LastBackup() string { return l.data("backup.last.json") }

// DiskReserve is space the daemon holds back on the data dir's disk and
// gives up when the disk is full, so that storing a message and
// committing an answer still succeed. It lives in logs/, a directory of
// the daemon's that no run sees.
func (l Layout) DiskReserve() string { return filepath.Join(l.Logs(), "disk.reserve") }

// Backups is where 'nanoclawd backup' writes when neither --to nor
// backup.dir says: private, like the rest of the data dir, and never the
// working directory (a git checkout, say).
func (l Layout) Backups() string { return l.data("backups") }

// Lock is the single-instance lock (flock; the holder's PID inside).
func (l Layout) Lock() string { return l.data("nanoclawd.lock") }

// ControlSocket is the daemon's status socket (mode 0600).
func (l Layout) ControlSocket() string { return l.data("control.sock") }

// GroupsChanged is the marker the CLI touches after changing the registry,
// so the running daemon reloads it at once.
func (l Layout) GroupsChanged() string { return l.data("groups.changed") }

// Logs is the daemon's log directory.
func (l Layout) Logs() string { return l.data(LogsDir) }

// DaemonLog is the daemon's own log file (rotated beside it).
func (l Layout) DaemonLog() string { return filepath.Join(l.Logs(), "nanoclawd.log") }

// Gateways holds the socket of each confined run's egress gateway (when
// the path is short enough for a Unix socket).
func (l Layout) Gateways() string { return l.data("gw") }

// Placeholders keeps the empty mount points of protected names between
// confined runs.
func (l Layout) Placeholders() string { return l.data("placeholders") }

// IPCRoot holds one IPC directory per group and the quarantine.
func (l Layout) IPCRoot() string { return l.data("ipc") }

// IPCErrors is the quarantine of refused IPC files.
func (l Layout) IPCErrors() string { return filepath.Join(l.IPCRoot(), ErrorsDir) }

// IPC is a group's IPC directory (NANOCLAW_IPC_DIR of its runs).
func (l Layout) IPC(folder string) IPCDir { return IPCDir(filepath.Join(l.IPCRoot(), folder)) }

// Sessions holds one agent session directory per group.
func (l Layout) Sessions() string { return l.data("sessions") }

// Session is a group's agent session directory (NANOCLAW_SESSION_DIR).
func (l Layout) Session(folder string) string { return filepath.Join(l.Sessions(), folder) }

// SessionHome is HOME of a group's confined runs, inside its session
// directory, so nothing of the owner's home is needed.
func (l Layout) SessionHome(folder string) string {
	return filepath.Join(l.Session(folder), SessionHomeDir)
}

// Outgoing holds the daemon's copy of each file an agent's send_message
// sends, made when the request is decided (so the agent cannot change what
// is sent after the check) and removed once the message is sent or given
// up. No agent may read it: it holds every group's files.
func (l Layout) Outgoing() string { return l.data("outgoing") }

// Transcribing holds the daemon's copies of voice notes being transcribed:
// the transcriber reads those, never a group's folder.
func (l Layout) Transcribing() string { return l.data("transcribe") }

// Group is a group's folder, its agent's working directory.
func (l Layout) Group(folder string) string { return filepath.Join(l.GroupsDir, folder) }

// GroupMemory is a group's CLAUDE.md.
func (l Layout) GroupMemory(folder string) string { return filepath.Join(l.Group(folder), MemoryFile) }

// GroupMedia holds the images received in a group's chat, as media/<id>.<ext>.
func (l Layout) GroupMedia(folder string) string { return filepath.Join(l.Group(folder), MediaDir) }

// GroupLogs holds a group's run logs and audit trail: the daemon's, never
// writable by the group's agent.
func (l Layout) GroupLogs(folder string) string { return filepath.Join(l.Group(folder), LogsDir) }

// SecurityLog is a group's audit trail, one JSON violation a line.
func (l Layout) SecurityLog(folder string) string {
	return filepath.Join(l.GroupLogs(folder), "security.jsonl")
}

// Global is the folder of the memory every group shares.
func (l Layout) Global() string { return l.Group(GlobalFolder) }

// GlobalMemory is the shared CLAUDE.md: every non-main agent reads it,
// only the main group's writes it.
func (l Layout) GlobalMemory() string { return filepath.Join(l.Global(), MemoryFile) }

// StateFiles are the daemon's own files and directories in the data dir,
// which no confined agent may see: the security policy denies each of them
// (and the sandbox cuts them out of any tree an allowRead opens). A
// group's own IPC directory lies under IPCRoot and is mounted back for its
// runs only; sessions are denied per group, since a run needs its own.
func (l Layout) StateFiles() []string {
	var out []string
	out = append(out, SQLiteFiles(l.DB())...)
	out = append(out, SQLiteFiles(l.WhatsAppDB())...)
	return append(out, l.WhatsAppVersion(), l.WhatsAppStatus(), l.LastBackup(), l.Lock(), l.ControlSocket(),
		l.GroupsChanged(), l.Logs(), l.Gateways(), l.Placeholders(), l.IPCRoot(), l.Outgoing(), l.Transcribing(), l.Backups())
}

// SQLiteFiles are a SQLite database and the journal files WAL mode keeps
// beside it.
func SQLiteFiles(db string) []string { return []string{db, db + "-wal", db + "-shm"} }

// Reserved tells whether a group may not use folder as its folder name,
// because the name is taken beside the groups' own: the shared memory's
// folder (any case, for case-insensitive file systems) and the IPC
// quarantine.
func Reserved(folder string) bool {
	return strings.EqualFold(folder, GlobalFolder) || folder == ErrorsDir
}

// ValidFolder checks a group's folder name: it becomes a directory name
// under groupsDir and dataDir/ipc, so it may not contain path tricks.
func ValidFolder(name string) error {
	if !folderName(name) || Reserved(name) {
		return fmt.Errorf("folder %q: use 1-64 letters, digits, '_' or '-', starting with a letter or digit, and not \"global\" or \"errors\"", name)
	}
	return nil
}

// folderName is ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$, without compiling a
// regexp in every program that names a path (the sandbox's first process
// among them).
func folderName(name string) bool {
	if name == "" || len(name) > 64 || name[0] == '_' || name[0] == '-' {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (l Layout) data(name string) string { return filepath.Join(l.DataDir, name) }

// IPCDir is one group's IPC directory. An agent knows it as
// NANOCLAW_IPC_DIR; the daemon as Layout.IPC(folder).
type IPCDir string

// Messages is where message requests are written.
func (d IPCDir) Messages() string { return d.join(MessagesDir) }

// Tasks is where task and group requests are written.
func (d IPCDir) Tasks() string { return d.join(TasksDir) }

// Results holds the daemon's verdict on each request, under the request's name.
func (d IPCDir) Results() string { return d.join(ResultsDir) }

// Input holds follow-up messages for the running agent.
func (d IPCDir) Input() string { return d.join(InputDir) }

// Close is the empty file that asks the running agent to finish.
func (d IPCDir) Close() string { return filepath.Join(d.Input(), CloseFile) }

// TasksSnapshot lists the tasks the group may see, for list_tasks.
func (d IPCDir) TasksSnapshot() string { return d.join(TasksSnapshot) }

// GroupsSnapshot lists the chats the main group may register.
func (d IPCDir) GroupsSnapshot() string { return d.join(GroupsSnapshot) }

func (d IPCDir) join(name string) string { return filepath.Join(string(d), name) }
