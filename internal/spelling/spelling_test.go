package spelling_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/spelling"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	known := []string{"session", "max_session", "cleanup", "cleanup_timeout", "GANTRY_WORKERS"}
	for word, want := range map[string]string{
		"sesion": "session", "sessoin": "session", "max_sesion": "max_session", "cleanp": "cleanup", "GANTRY_WORKRES": "GANTRY_WORKERS",
	} {
		got, ok := spelling.Closest(word, known)
		require.True(t, ok, word)
		require.Equal(t, want, got, word)
	}
	_, ok := spelling.Closest("completely-different", known)
	require.False(t, ok)
}
