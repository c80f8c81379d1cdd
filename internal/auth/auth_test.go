package auth_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/auth"
)

func TestPasswordHashing(t *testing.T) {
	t.Parallel()
	hash, err := auth.HashPassword("correct-horse-battery")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$"))
	require.True(t, auth.CheckPassword(hash, "correct-horse-battery"))
	require.False(t, auth.CheckPassword(hash, "correct-horse-batterz"))
	require.False(t, auth.CheckPassword("not a hash", "x"))

	again, err := auth.HashPassword("correct-horse-battery")
	require.NoError(t, err)
	require.NotEqual(t, hash, again, "each hash has its own salt")

	_, err = auth.HashPassword("short")
	require.ErrorContains(t, err, "at least 12")
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	s1, h1, err := auth.NewSecret(auth.TokenPrefix)
	require.NoError(t, err)
	s2, _, err := auth.NewSecret(auth.TokenPrefix)
	require.NoError(t, err)
	require.NotEqual(t, s1, s2)
	require.True(t, strings.HasPrefix(s1, "gnt_"))
	require.Equal(t, h1, auth.HashSecret(s1))
	require.Len(t, h1, 32)
}

func TestParseScopes(t *testing.T) {
	t.Parallel()
	got, err := auth.ParseScopes([]string{"read", " write", "read"})
	require.NoError(t, err)
	require.Equal(t, []string{"read", "write"}, got)
	_, err = auth.ParseScopes(nil)
	require.Error(t, err)
	_, err = auth.ParseScopes([]string{"root"})
	require.ErrorContains(t, err, `"root"`)
}
