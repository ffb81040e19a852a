// Package standby keeps agents started ahead (agent.warm): for each of
// the most recently active groups one agent waiting for its first prompt,
// so that a message is answered without a cold start. The pool starts,
// checks and stops them through a Starter — the router, which also hands
// a taken one its prompt.
package standby

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// Warm agents: for the agent.warm most recently active groups the pool
// keeps an agent started ahead — booted (node and the SDK's CLI take
// seconds), confined, holding the group's policy and session — waiting
// for its first prompt. A message for such a group is written to the
// waiting agent instead of starting one. A standby counts against
// agent.maxConcurrent only once it has work (it runs inside the queue's
// job then), and it is used only if what it was started with is still
// what a fresh run would get; otherwise it is stopped and a fresh one
// starts. A standby is not under agent.idleTimeout (it writes nothing
// while it waits) but waits up to agent.warmFor; one that ends for any
// other reason is started again.
//
// The life of a standby: it is started for one of the agent.warm most
// recently active groups that has none and no run going; it waits up to
// agent.warmFor for its prompt; when it ends for any other reason than
// being taken or expiring, it is started again — at once when it was
// replaced, with backoff when it ended on its own (a crash, a kill) —
// unless its command does not wait for a prompt at all. One standby:
// standby.go; how a run adopts it: the router's adopt.go.

// Backoff of a standby that ended on its own: it doubles from the first
// delay up to the last; a standby that lived restartCalm counts as calm,
// and its end starts the doubling again.
const (
	restartFirst = time.Second
	restartLast  = 5 * time.Minute
	restartCalm  = time.Minute
)

// Groups looks registered groups up.
type Groups interface {
	ByJID(ctx context.Context, jid string) (groups.Group, error)
	ByFolder(ctx context.Context, folder string) (groups.Group, error)
}

// Chats knows which group chats were active last.
type Chats interface {
	RecentGroupChats(ctx context.Context, n int) ([]string, error)
}

// Pool is the agents started ahead, one at most per group.
type Pool[A Agent] struct {
	starter Starter[A]
	groups  Groups
	chats   Chats
	config  func() *config.Config // the current config (it may be reloaded)
	log     zerolog.Logger

	// runs counts the standbys' goroutines, taken ones too: each settles
	// its run in SQLite (the IPC token, the process group's mark) after
	// its process ends, so the store closes only after Wait.
	runs sync.WaitGroup

	mu      sync.Mutex
	ctx     context.Context // the daemon's: once it ends, no standby is started and waiting ones stop
	recent  []string        // folders, most recently active first
	waiting map[string]*Standby[A]
	// stopping holds standbys told to stop whose process may still run.
	// A group's next run waits for its own to be gone: a standby takes the
	// first file in the group's input/ as its prompt, so one still alive
	// could take, and answer, a follow-up meant for the run.
	stopping map[string]*Standby[A]
	busy     map[string]int         // groups with a run going (Enter, Leave): no standby for them
	crashes  map[string]int         // standbys of a group that ended on their own, in a row
	retry    map[string]*time.Timer // a standby's restart waiting for its backoff
	unfit    string                 // an agent.command that answers or exits before its prompt
}

// New returns a pool whose agents s starts; it starts none before WarmUp.
func New[A Agent](s Starter[A], groups Groups, chats Chats, config func() *config.Config, log zerolog.Logger) *Pool[A] {
	return &Pool[A]{starter: s, groups: groups, chats: chats, config: config, log: log,
		waiting: map[string]*Standby[A]{}, stopping: map[string]*Standby[A]{},
		busy: map[string]int{}, crashes: map[string]int{}, retry: map[string]*time.Timer{}}
}

// WarmUp starts standbys for the agent.warm most recently active groups,
// and keeps them until ctx ends. Then those waiting for a prompt are
// stopped; a taken one ends with its run (which a shutdown asks to finish
// in its grace, like any run). Wait waits until all are gone.
func (p *Pool[A]) WarmUp(ctx context.Context) {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	context.AfterFunc(ctx, p.stopWaiting)
	n := p.config().Agent.Warm
	if n <= 0 {
		return
	}
	jids, err := p.chats.RecentGroupChats(ctx, n)
	if err != nil {
		p.log.Warn().Err(err).Msg("pick the groups to keep agents ready for")
		return
	}
	for i := len(jids) - 1; i >= 0; i-- {
		if g, err := p.groups.ByJID(ctx, jids[i]); err == nil {
			p.Touch(g.Folder)
		}
	}
}

// Wait returns once every standby started is gone and its run settled;
// after ctx of WarmUp ended, none is started again.
func (p *Pool[A]) Wait() { p.runs.Wait() }

// stopWaiting stops every standby waiting for its prompt, and the restarts
// waiting for their backoff: the daemon stops.
func (p *Pool[A]) stopWaiting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for folder, sb := range p.waiting {
		delete(p.waiting, folder)
		p.stop(sb)
	}
	for folder, t := range p.retry {
		t.Stop()
		delete(p.retry, folder)
	}
}

// Status returns, for each group whose agent is started ahead and waiting
// for its first prompt, when that agent was started.
func (p *Pool[A]) Status() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]time.Time, len(p.waiting))
	for folder, sb := range p.waiting {
		out[folder] = sb.since
	}
	return out
}

// Enter and Leave bracket a run of folder: no standby is started for a
// group while its own run goes.
func (p *Pool[A]) Enter(folder string) {
	p.mu.Lock()
	p.busy[folder]++
	p.mu.Unlock()
}

func (p *Pool[A]) Leave(folder string) {
	p.mu.Lock()
	if p.busy[folder]--; p.busy[folder] <= 0 {
		delete(p.busy, folder)
	}
	p.mu.Unlock()
}

// Touch marks folder as the most recently active group: it gets a standby
// (unless a run of it is going), and the group that falls out of the
// agent.warm most recent loses its own.
func (p *Pool[A]) Touch(folder string) {
	n := p.config().Agent.Warm
	p.mu.Lock()
	if p.ctx == nil || p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.recent = append([]string{folder}, removeString(p.recent, folder)...)
	if len(p.recent) > n {
		for _, f := range p.recent[max(n, 0):] {
			if sb := p.waiting[f]; sb != nil {
				delete(p.waiting, f)
				p.stop(sb)
			}
			if t := p.retry[f]; t != nil {
				t.Stop()
				delete(p.retry, f)
			}
		}
		p.recent = p.recent[:max(n, 0)]
	}
	p.mu.Unlock()
	p.Ensure(folder)
}

// Take hands over g's standby if it runs and was started with what a
// fresh run would get now (policy, options, session, command); a stale one
// is stopped. nil: start one cold.
func (p *Pool[A]) Take(ctx context.Context, g groups.Group) *Standby[A] {
	p.awaitStopped(g.Folder)
	p.mu.Lock()
	sb := p.waiting[g.Folder]
	delete(p.waiting, g.Folder)
	if sb != nil {
		sb.taken = true
	}
	p.mu.Unlock()
	if sb == nil {
		return nil
	}
	drop := func() *Standby[A] {
		p.mu.Lock()
		p.stop(sb)
		p.mu.Unlock()
		<-sb.ended
		return nil
	}
	if !closed(sb.Agent.Running()) {
		return drop() // not running yet: a cold start is as fast
	}
	select {
	case <-sb.ended:
		return nil // it ended meanwhile (crash, killed)
	default:
	}
	if fp, err := p.starter.Fingerprint(ctx, g); err != nil || fp != sb.Agent.Fingerprint() {
		p.log.Info().Str("group", g.Folder).Msg("the agent started ahead was started with another policy or session; starting a fresh one")
		return drop()
	}
	p.mu.Lock()
	delete(p.crashes, g.Folder)
	p.mu.Unlock()
	return sb
}

// Drop stops folder's standby, if any (a task run takes the group), and
// waits until it is gone.
func (p *Pool[A]) Drop(folder string) {
	p.mu.Lock()
	if sb := p.waiting[folder]; sb != nil {
		delete(p.waiting, folder)
		p.stop(sb)
	}
	p.mu.Unlock()
	p.awaitStopped(folder)
}

// Refresh replaces every standby that was started with something a fresh
// run would no longer get (the config, the group's policy or its session
// changed), stops those of groups no longer registered, and starts those
// the most recent groups lack (agent.warm or agent.command changed). It
// does not wait for the stale ones to be gone.
func (p *Pool[A]) Refresh(ctx context.Context) {
	p.mu.Lock()
	current := make(map[string]*Standby[A], len(p.waiting))
	for folder, sb := range p.waiting {
		current[folder] = sb
	}
	recent := append([]string(nil), p.recent...)
	p.mu.Unlock()
	// Fingerprints read SQLite: not under p.mu, which status takes.
	var stale []*Standby[A]
	for folder, sb := range current {
		g, err := p.groups.ByFolder(ctx, folder)
		fp := ""
		if err == nil {
			fp, err = p.starter.Fingerprint(ctx, g)
		}
		if err != nil || fp != sb.Agent.Fingerprint() {
			stale = append(stale, sb)
		}
	}
	p.mu.Lock()
	for _, sb := range stale {
		if folder := sb.folder; p.waiting[folder] == sb {
			delete(p.waiting, folder)
			p.stop(sb) // ended starts the next one
			p.log.Info().Str("group", folder).Msg("the agent started ahead is replaced: the config, the group's policy or its session changed")
		}
	}
	p.mu.Unlock()
	for _, folder := range recent {
		p.Ensure(folder)
	}
}

// stop ends sb and remembers it until it is gone; p.mu is held.
func (p *Pool[A]) stop(sb *Standby[A]) {
	sb.stopped = true
	sb.cancel()
	p.stopping[sb.folder] = sb
}

// awaitStopped waits until no standby of folder told to stop still runs.
func (p *Pool[A]) awaitStopped(folder string) {
	p.mu.Lock()
	sb := p.stopping[folder]
	p.mu.Unlock()
	if sb != nil {
		<-sb.ended
	}
}

// commandKey identifies an agent.command.
func commandKey(cfg *config.Config) string { return strings.Join(cfg.Agent.Command, "\x00") }

// wants tells whether folder should get a standby now; p.mu is held.
func (p *Pool[A]) wants(folder string, cfg *config.Config) bool {
	n := cfg.Agent.Warm
	return p.ctx != nil && p.ctx.Err() == nil && n > 0 &&
		slices.Contains(p.recent[:min(n, len(p.recent))], folder) &&
		p.waiting[folder] == nil && p.stopping[folder] == nil && p.busy[folder] == 0 && p.retry[folder] == nil &&
		p.unfit != commandKey(cfg)
}

// Ensure starts folder's standby if it should have one now.
func (p *Pool[A]) Ensure(folder string) {
	cfg := p.config()
	p.mu.Lock()
	ok, ctx := p.wants(folder, cfg), p.ctx
	p.mu.Unlock()
	if !ok {
		return
	}
	g, err := p.groups.ByFolder(ctx, folder) // SQLite: not under p.mu
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wants(folder, cfg) {
		p.waiting[folder] = p.launch(p.ctx, g, cfg)
	}
}

// launch starts an agent for g that waits for its first prompt; p.mu is
// held.
func (p *Pool[A]) launch(parent context.Context, g groups.Group, cfg *config.Config) *Standby[A] {
	// Not parent's child: a taken standby is its run's, which ends it
	// (stopWaiting stops the others when parent ends).
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	sb := &Standby[A]{cancel: cancel, closing: make(chan struct{}), done: make(chan error, 1), ended: make(chan struct{}),
		since: time.Now(), command: commandKey(cfg), folder: g.Folder}
	sb.Agent = p.starter.New(g)
	p.runs.Add(1) // under p.mu while p.ctx runs: never after Wait began
	go func() {
		defer p.runs.Done()
		expiry := time.AfterFunc(cfg.Agent.WarmFor.D(), func() { p.expire(sb) })
		err := p.starter.Run(ctx, sb.Agent, sb.closing)
		expiry.Stop()
		sb.done <- err
		close(sb.ended)
		p.ended(sb, err)
	}()
	return sb
}

// expire stops sb if it is still waiting for its first prompt after
// agent.warmFor: its group has been quiet that long.
func (p *Pool[A]) expire(sb *Standby[A]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	folder := sb.folder
	if p.waiting[folder] != sb {
		return
	}
	delete(p.waiting, folder)
	p.recent = removeString(p.recent, folder) // its next message makes it recent again
	sb.expired = true
	p.stop(sb)
	p.log.Info().Str("group", folder).Dur("waited", time.Since(sb.since)).Msg("the agent started ahead waited agent.warmFor for a message; stopped")
}

// ended decides what follows the end of sb.
func (p *Pool[A]) ended(sb *Standby[A], err error) {
	folder := sb.folder
	early := sb.Agent.Early()
	p.mu.Lock()
	if p.waiting[folder] == sb {
		delete(p.waiting, folder)
	}
	if p.stopping[folder] == sb {
		delete(p.stopping, folder)
	}
	again := false
	switch {
	case sb.taken || sb.expired || p.ctx.Err() != nil:
		// Its run's to report; its group was quiet for agent.warmFor; or
		// the daemon stops.
	case sb.stopped:
		again = true // replaced (stale) or dropped: the next one is due now
	case early || err == nil:
		// An agent command that does not wait for its prompt (a stand-in,
		// a custom command): started again it would only do the same.
		if p.unfit != sb.command {
			p.unfit = sb.command
			p.log.Warn().Str("group", folder).Strs("command", strings.Split(sb.command, "\x00")).
				Msg("the agent command answered or exited before it was given a prompt: agents are not started ahead for it (agent.warm)")
		}
	default:
		n := p.crashes[folder] + 1
		if time.Since(sb.since) >= restartCalm {
			n = 1
		}
		p.crashes[folder] = n
		delay := min(restartFirst<<min(n-1, 10), restartLast)
		p.retry[folder] = time.AfterFunc(delay, func() {
			p.mu.Lock()
			delete(p.retry, folder)
			p.mu.Unlock()
			p.Ensure(folder)
		})
		p.log.Warn().Err(err).Str("group", folder).Int("in_a_row", n).Dur("restart_in", delay).
			Msg("the agent started ahead ended before it was given a prompt; starting another")
	}
	p.mu.Unlock()
	if again {
		p.Ensure(folder)
	}
}

func removeString(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
