package gitrepo

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseNameStatus(t *testing.T) {
	t.Parallel()

	got, err := parseNameStatus([]byte("M\x00a b\x00T\x00link\x00A\x00new\nline\x00D\x00gone\x00" +
		"R087\x00old\x00new\x00C100\x00src\x00copy\x00R100\x00\xff\xfe\x00ok\x00"))
	require.NoError(t, err)
	require.Equal(t, Changes{
		Modified: []string{"a b", "link"},
		Added:    []string{"new\nline", "copy"},
		Deleted:  []string{"gone"},
		Renamed:  []Rename{{Old: "old", New: "new"}, {Old: "\xff\xfe", New: "ok"}},
	}, got)

	empty, err := parseNameStatus(nil)
	require.NoError(t, err)
	require.Empty(t, empty.Paths())

	for _, bad := range []string{
		"M",                   // no NUL after the status
		"M\x00",               // no path
		"M\x00a",              // path without NUL
		"\x00a\x00",           // empty status
		"R100\x00old\x00",     // rename without its new path
		"R100\x00\x00new\x00", // empty old path
		"MM\x00a\x00",         // unknown status
		"Rxx\x00a\x00b\x00",   // bad score
		"U\x00a\x00",          // unmerged: impossible between commits
		"X\x00a\x00",
		"Q\x00a\x00",
	} {
		_, err := parseNameStatus([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()

	u, err := parseURL("https://x-access-token:s3cr%2Ft@GitHub.com/acme/infra.git")
	require.NoError(t, err)
	require.Equal(t, "https://x-access-token:s3cr%2Ft@GitHub.com/acme/infra.git", u.git, "git gets the URL as given")
	require.Equal(t, "https://x-access-token@github.com/acme/infra.git", u.key)
	require.Equal(t, "https://x-access-token:xxxxx@GitHub.com/acme/infra.git", u.redacted)
	require.Equal(t, "s3cr/t", u.password)

	u, err = parseURL("git@github.com:acme/infra.git")
	require.NoError(t, err)
	require.Equal(t, "git@github.com:acme/infra.git", u.git)

	u, err = parseURL("/srv/git/../git/infra.git")
	require.NoError(t, err)
	require.Equal(t, "/srv/git/infra.git", u.git)
}
