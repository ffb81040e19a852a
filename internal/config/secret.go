package config

import (
	"net/url"
	"reflect"
	"strings"
)

// Secrets are tagged where they are declared: secret:"true" on a field
// whose whole value is one (a token, a credential), secret:"url" on a URL
// that may carry one (user:password@, ?key=…). Masked hides them all, so
// a field added with its tag is hidden wherever the config is shown, and
// secret_test.go fails for a field that looks secret but has no tag.

// SecretShown is what a shown config holds in place of a secret that has a value.
const SecretShown = "(set)"

// Masked is a copy of c with every secret hidden: what `status --json`
// shows of the config in force. c is not changed.
func (c *Config) Masked() *Config {
	out := *c
	mask(reflect.ValueOf(&out).Elem())
	return &out
}

// mask hides the secrets inside v (settable). Maps and slices that may
// hold secrets are copied first, as the copy in Masked shares them with
// the original.
func mask(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := v.Field(i)
			if !t.Field(i).IsExported() {
				continue
			}
			switch t.Field(i).Tag.Get("secret") {
			case "true":
				if f.String() != "" {
					f.SetString(SecretShown)
				}
			case "url":
				f.SetString(maskURL(f.String()))
			default:
				mask(f)
			}
		}
	case reflect.Map:
		if v.IsNil() || !holdsSecrets(v.Type().Elem()) {
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			mask(e)
			m.SetMapIndex(it.Key(), e)
		}
		v.Set(m)
	case reflect.Slice:
		if v.IsNil() || !holdsSecrets(v.Type().Elem()) {
			return
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(s, v)
		for i := range s.Len() {
			mask(s.Index(i))
		}
		v.Set(s)
	case reflect.Pointer:
		if v.IsNil() || !holdsSecrets(v.Type().Elem()) {
			return
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(v.Elem())
		mask(p.Elem())
		v.Set(p)
	}
}

// holdsSecrets tells whether a value of type t can hold a tagged field.
func holdsSecrets(t reflect.Type) bool { return len(secretKeys(t, "")) > 0 }

// maskURL hides a URL's password and its query values; a value that does
// not parse is hidden whole.
func maskURL(s string) string {
	if s == "" {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return SecretShown
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), SecretShown)
	} else if u.User != nil {
		u.User = url.User(SecretShown) // a token as the user name
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{SecretShown}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// SecretKeys are the dotted keys of every field tagged secret ("*" for a
// map's key), for tests that set them all.
func SecretKeys() []string { return secretKeys(reflect.TypeFor[Config](), "") }

func secretKeys(t reflect.Type, prefix string) []string {
	var out []string
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			key := strings.TrimPrefix(prefix+"."+name, ".")
			if f.Tag.Get("secret") != "" {
				out = append(out, key)
			} else {
				out = append(out, secretKeys(f.Type, key)...)
			}
		}
	case reflect.Map:
		out = secretKeys(t.Elem(), prefix+".*")
	case reflect.Slice, reflect.Pointer:
		out = secretKeys(t.Elem(), prefix)
	}
	return out
}
