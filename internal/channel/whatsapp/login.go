package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mdp/qrterminal/v3"
	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
)

// ErrBadPhone: --phone is not a full international number.
var ErrBadPhone = errors.New("--phone wants the full international number, country code first, digits only (e.g. 491701234567 for +49 170 1234567)")

// LoginOptions configures Login.
type LoginOptions struct {
	DataDir string
	Phone   string         // empty: QR code; else pair by code for this number
	Out     io.Writer      // QR codes, the pairing code and instructions
	Timeout time.Duration  // 0 = 5 minutes
	Logger  zerolog.Logger // whatsmeow's logs; the zero value discards them
	// FetchVersion as in Options; nil asks web.whatsapp.com.
	FetchVersion VersionFetcher
}

// pairedSettle is how long Login waits, after the phone accepted, for the
// first logged-in connection that completes the pairing server-side.
const pairedSettle = 30 * time.Second

// Login pairs <DataDir>/whatsapp.db with a WhatsApp account and returns the
// account's phone-number JID (user@s.whatsapp.net, which is also the
// "message yourself" chat). It shows QR codes on Out, a new one whenever
// the last expired, until one is scanned or Timeout passes; with Phone it
// shows a pairing code instead. Errors: ErrAlreadyPaired (own is still
// returned), ErrNoNetwork (within seconds when WhatsApp is unreachable),
// ErrRateLimited, ErrClientOutdated, ErrLoginTimeout, ErrBadPhone.
func Login(ctx context.Context, o LoginOptions) (own types.JID, err error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	phone, err := normalizePhone(o.Phone)
	if err != nil {
		return types.JID{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	container, device, err := openStore(ctx, o.DataDir, o.Logger)
	if err != nil {
		return types.JID{}, err
	}
	defer container.Close()
	if device.ID != nil {
		own = device.ID.ToNonAD()
		return own, fmt.Errorf("%w as %s: to pair again, stop the daemon and delete %s", ErrAlreadyPaired, own, StoreFile(o.DataDir))
	}

	useCurrentVersion(ctx, o.DataDir, o.FetchVersion) // an outdated version cannot even pair
	for {
		own, again, err := loginRound(withWhatsmeowLog(ctx, o.Logger), newClient(device, o.Logger), phone, o.Out)
		if !again {
			return own, err
		}
		fmt.Fprintln(o.Out, "The codes expired; here are new ones.")
	}
}

// loginRound runs one login websocket: WhatsApp hands out about 160 s of
// QR codes per connection. again means they ran out with time left.
func loginRound(ctx context.Context, cli *whatsmeow.Client, phone string, out io.Writer) (own types.JID, again bool, err error) {
	qr, err := cli.GetQRChannel(ctx)
	if err != nil {
		return own, false, fmt.Errorf("start WhatsApp login: %w", err)
	}
	loggedIn := make(chan struct{}, 1)
	cli.AddEventHandler(func(evt any) {
		if _, ok := evt.(*events.Connected); ok {
			signal(loggedIn, struct{}{})
		}
	})
	if err := cli.ConnectContext(ctx); err != nil {
		return own, false, describeConnectError(err)
	}
	defer cli.Disconnect()

	codeShown := false
	for {
		var item whatsmeow.QRChannelItem
		var open bool
		select {
		case item, open = <-qr:
		case <-ctx.Done():
			return own, false, ErrLoginTimeout
		}
		if !open {
			item = whatsmeow.QRChannelTimeout
		}
		switch {
		case item.Event == whatsmeow.QRChannelEventCode && phone == "":
			fmt.Fprintf(out, "\nScan this with WhatsApp on your phone: Settings → Linked devices → Link a device (new code in %s).\n", item.Timeout)
			qrterminal.GenerateHalfBlock(item.Code, qrterminal.L, out)
		case item.Event == whatsmeow.QRChannelEventCode && !codeShown:
			// The first QR code means the login socket is ready for a pairing-code request.
			code, err := cli.PairPhone(ctx, phone, true, whatsmeow.PairClientChrome, "Chrome (Linux)")
			if err != nil {
				return own, false, describePairError(err)
			}
			codeShown = true
			fmt.Fprintf(out, "On the phone of +%s: WhatsApp → Settings → Linked devices → Link a device → Link with phone number instead, and enter\n\n    %s\n\n", phone, code)
		case item.Event == whatsmeow.QRChannelEventCode:
			// Pairing by code: the QR codes that keep coming are not shown.
		case item.Event == whatsmeow.QRChannelScannedWithoutMultidevice.Event:
			fmt.Fprintln(out, "The phone's WhatsApp is too old for linked devices: update it and scan again.")
		case item.Event == whatsmeow.QRChannelSuccess.Event:
			if cli.Store.ID == nil {
				return own, false, errors.New("WhatsApp reported success but stored no account: run `nanoclawd whatsapp login` again")
			}
			own = cli.Store.ID.ToNonAD()
			// The phone accepted; WhatsApp now reconnects once to finish.
			// Waiting for that keeps the first daemon start clean.
			select {
			case <-loggedIn:
			case <-time.After(pairedSettle):
			case <-ctx.Done():
			}
			fmt.Fprintf(out, "Paired with WhatsApp as +%s.\n", own.User)
			return own, false, nil
		case item.Event == whatsmeow.QRChannelTimeout.Event:
			return own, ctx.Err() == nil, ErrLoginTimeout
		case item.Event == whatsmeow.QRChannelClientOutdated.Event:
			return own, false, ErrClientOutdated
		case item.Event == whatsmeow.QRChannelEventError:
			return own, false, describePairError(item.Error)
		case item.Event == whatsmeow.QRChannelErrUnexpectedEvent.Event:
			return own, false, errors.New("WhatsApp refused the login (the account may be banned or the session already in use): check the phone, then run `nanoclawd whatsapp login` again")
		default:
			return own, false, fmt.Errorf("WhatsApp login needs a step nanoclawd does not support (%s): pair by QR code instead", item.Event)
		}
	}
}

func describePairError(err error) error {
	switch {
	case errors.Is(err, whatsmeow.ErrIQRateOverLimit):
		return fmt.Errorf("%w (too many pairing attempts)", ErrRateLimited)
	case errors.Is(err, whatsmeow.ErrPhoneNumberTooShort), errors.Is(err, whatsmeow.ErrPhoneNumberIsNotInternational),
		errors.Is(err, whatsmeow.ErrIQBadRequest):
		return fmt.Errorf("%w: WhatsApp said: %v", ErrBadPhone, err)
	}
	return fmt.Errorf("WhatsApp pairing failed: %w", err)
}

// normalizePhone keeps the digits of a phone number ("+49 170-1234567" is
// fine) and checks it has a country code and a plausible length.
func normalizePhone(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	digits := strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9':
			return r
		case r == '+' || r == ' ' || r == '-' || r == '(' || r == ')' || r == '.':
			return -1
		}
		return 'x'
	}, s)
	if strings.Contains(digits, "x") || strings.HasPrefix(digits, "0") || len(digits) < 7 || len(digits) > 15 {
		return "", fmt.Errorf("%w; got %q", ErrBadPhone, s)
	}
	return digits, nil
}

// OwnerJID is the chat of the owner's number as the assistant's own account
// sees it (own-number mode: the owner's chat with the bot).
func OwnerJID(number string) (types.JID, error) {
	digits, err := normalizePhone(number)
	if err != nil || digits == "" {
		return types.JID{}, fmt.Errorf("--owner wants your full international number, country code first (e.g. 491701234567 for +49 170 1234567); got %q", number)
	}
	return types.NewJID(digits, types.DefaultUserServer), nil
}

// Logout unlinks this device from the WhatsApp account (it disappears from
// the phone's "Linked devices") and deletes the session in dataDir. When
// WhatsApp cannot be reached, the local session is deleted anyway and the
// error says to remove the device on the phone. Not paired: ErrNotPaired.
// The daemon must not be running: a second connection would replace its.
func Logout(ctx context.Context, dataDir string, log zerolog.Logger) (types.JID, error) {
	if _, err := os.Stat(StoreFile(dataDir)); errors.Is(err, os.ErrNotExist) {
		return types.JID{}, ErrNotPaired
	}
	container, device, err := openStore(ctx, dataDir, log)
	if err != nil {
		return types.JID{}, err
	}
	defer container.Close()
	if device.ID == nil {
		return types.JID{}, ErrNotPaired
	}
	own := device.ID.ToNonAD()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	useCurrentVersion(ctx, dataDir, nil)
	cli := newClient(device, log)
	err = cli.ConnectContext(withWhatsmeowLog(ctx, log))
	if err == nil {
		err = cli.Logout(ctx) // on success whatsmeow deletes the device from the store
		cli.Disconnect()
	}
	if err != nil {
		container.Close()
		if cerr := clearStore(dataDir); cerr != nil {
			return own, fmt.Errorf("could not reach WhatsApp (%v) nor delete %s (%v): delete it by hand", describeConnectError(err), StoreFile(dataDir), cerr)
		}
		return own, fmt.Errorf("deleted the session here, but could not tell WhatsApp (%v): remove \"nanoclawd\" under Linked devices on the phone", describeConnectError(err))
	}
	container.Close()
	if err := clearStore(dataDir); err != nil {
		return own, fmt.Errorf("unlinked, but could not delete %s: %w (delete it by hand)", StoreFile(dataDir), err)
	}
	return own, nil
}
