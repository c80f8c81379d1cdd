package approval_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approval"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the signed seeds in testdata/fuzz/FuzzVerify")

// The fuzz target verifies with fuzzSigner at fuzzNow; the signed seeds in
// testdata/fuzz/FuzzVerify were made with it (go test -run TestFuzzCorpus
// -update-corpus rewrites them).
var (
	fuzzSigner = approval.Signer{Key: []byte("fuzz-key-0123456789abcdef0123456789abcdef")}
	fuzzNow    = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
)

// signedSeeds are the corpus entries that must stay authentic: valid ones
// and one expired. The other entries in testdata are hand-made garbage.
var signedSeeds = map[string]struct {
	claims approval.Claims
	want   error
}{
	"valid":        {approval.Claims{Subject: "execution:123", Voter: "ada@example.com", Expires: fuzzNow.Add(72 * time.Hour)}, nil},
	"valid_nonce":  {approval.Claims{Subject: "gate:prod/7", Voter: "bob@example.com", Expires: fuzzNow.Add(time.Hour), Nonce: "KX7Q2M4ZC3PLWNHV5RBTYE6JGA"}, nil},
	"valid_escape": {approval.Claims{Subject: `execution:"<&>"`, Voter: "c@example.com", Expires: fuzzNow.Add(time.Second)}, nil},
	"expired":      {approval.Claims{Subject: "execution:1", Voter: "ada@example.com", Expires: fuzzNow.Add(-time.Second)}, approval.ErrExpired},
}

func corpusPath(name string) string { return filepath.Join("testdata", "fuzz", "FuzzVerify", name) }

// readSeed reads a corpus file holding one string(...) value.
func readSeed(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(corpusPath(name))
	require.NoError(t, err)
	header, value, ok := strings.Cut(strings.TrimSpace(string(b)), "\n")
	require.True(t, ok)
	require.Equal(t, "go test fuzz v1", header)
	require.True(t, strings.HasPrefix(value, "string(") && strings.HasSuffix(value, ")"), value)
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(value, "string("), ")"))
	require.NoError(t, err)
	return s
}

// TestFuzzCorpus keeps the signed seeds authentic, so that the fuzzer starts
// from tokens that get past the signature check.
func TestFuzzCorpus(t *testing.T) {
	for name, seed := range signedSeeds {
		if *updateCorpus {
			token, err := fuzzSigner.Sign(seed.claims)
			require.NoError(t, err)
			body := fmt.Sprintf("go test fuzz v1\nstring(%q)\n", token)
			require.NoError(t, os.WriteFile(corpusPath(name), []byte(body), 0o644))
		}
		got, err := fuzzSigner.Verify(readSeed(t, name), fuzzNow)
		if seed.want == nil {
			require.NoError(t, err, name)
		} else {
			require.ErrorIs(t, err, seed.want, name)
		}
		want := seed.claims
		want.Expires = want.Expires.Truncate(time.Second)
		require.Equal(t, want, got, name)
	}
}

// FuzzVerify: whatever the token, Verify does not panic, refuses with exactly
// one of ErrInvalid and ErrExpired, returns no claims with ErrInvalid, and
// accepts (or finds expired) only tokens that Sign produces byte for byte.
func FuzzVerify(f *testing.F) {
	for _, seed := range signedSeeds {
		token, err := fuzzSigner.Sign(seed.claims)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(token)
		body, sig, _ := strings.Cut(token, ".")
		f.Add(body + "." + sig[1:])
		f.Add(body)
	}
	f.Add("")
	f.Add(".")
	f.Add("a.b")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := fuzzSigner.Verify(token, fuzzNow)
		invalid, expired := errors.Is(err, approval.ErrInvalid), errors.Is(err, approval.ErrExpired)
		switch {
		case err == nil, expired && !invalid:
			if expired && fuzzNow.Before(c.Expires) {
				t.Fatalf("expired at %v, before now", c.Expires)
			}
			again, err := fuzzSigner.Sign(c)
			if err != nil {
				t.Fatalf("accepted claims %+v that Sign refuses: %v", c, err)
			}
			if again != token {
				t.Fatalf("accepted %q, but Sign(%+v) is %q", token, c, again)
			}
		case invalid && !expired:
			if c != (approval.Claims{}) {
				t.Fatalf("invalid token, yet claims %+v", c)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}
