// Package mock holds stand-ins for the small interfaces nanoclawd declares
// where it uses them: structs whose methods call func fields, so each test
// says exactly what the stand-in does.
package mock

import (
	"context"
	"io"
)

// Pairer is a setup.Pairer.
type Pairer struct {
	PairedFn func(ctx context.Context) (own string, ok bool, err error)
	PairFn   func(ctx context.Context, phone string, out io.Writer) (own string, err error)
}

func (p *Pairer) Paired(ctx context.Context) (string, bool, error) { return p.PairedFn(ctx) }

func (p *Pairer) Pair(ctx context.Context, phone string, out io.Writer) (string, error) {
	return p.PairFn(ctx, phone, out)
}
