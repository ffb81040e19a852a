package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// adopt gives sb the job's prompt: it answers it like a run started for
// it, and takes follow-ups and the request to finish from the job from
// now on. It returns when the agent has ended.
func (sb *standby) adopt(ctx context.Context, job runner.Job, prompt string, top int64, stopFollow, followDone chan struct{}) error {
	a := sb.run
	r := a.router
	// The prompt goes as a follow-up, written and listed under mu (see
	// follow), before follow starts from it, and only while the agent runs
	// (a retry's agent may be starting: the runner empties input/ first).
	var (
		file string
		err  error
	)
	for written := false; !written; {
		select {
		case <-a.running():
		case <-sb.ended:
			close(followDone)
			return <-sb.done
		}
		a.mu.Lock()
		if written = closed(a.started); written {
			file, err = runner.FollowUp(ctx, a.ipcDir, prompt, r.Reporter)
			if err == nil {
				a.batches, a.delivered, a.adopted = []batch{{top, file}}, top, prompt
			}
		}
		a.mu.Unlock()
	}
	if err != nil {
		sb.stop()
		<-sb.done
		close(followDone)
		return err
	}
	close(a.prompted) // the turn limits start
	r.Log.Debug().Str("group", a.group.Folder).Msg("a message for an agent started ahead")
	if r.Typing != nil {
		r.Typing.SetTyping(ctx, a.replyTo, true)
		defer r.Typing.SetTyping(context.WithoutCancel(ctx), a.replyTo, false)
	}
	go func() {
		defer close(followDone)
		a.follow(ctx, job.More, stopFollow)
	}()
	go func() {
		select {
		case <-job.Closing:
			close(sb.closing)
		case <-ctx.Done():
			sb.stop()
		case <-followDone:
		}
	}()
	return <-sb.done
}

// fingerprint sums up everything a run of g is started with but its
// prompt: a standby is used only when it is still the same.
func (r *Router) fingerprint(ctx context.Context, g groups.Group, useSession bool) (string, error) {
	cfg := r.Config()
	list, err := r.Groups.List(ctx)
	if err != nil {
		return "", err
	}
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(groups.Folders(list)))
	session := ""
	if useSession {
		if session, err = r.Messages.Session(ctx, g.Folder); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal([]any{eff, cfg.Agent, cfg.AssistantName, cfg.Timezone, g, session})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
