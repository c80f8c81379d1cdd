package runner

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestRedactor(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		secrets []string
		input   string
		want    string
	}{
		{"no secrets", nil, "plain text", "plain text"},
		{"one secret", []string{"hunter2"}, "pw=hunter2!", "pw=****!"},
		{"repeated", []string{"abc"}, "abcabc abc", "******** ****"},
		{"longest wins", []string{"abc", "abcdef"}, "x abcdef abcd", "x **** ****d"},
		{"overlapping start", []string{"aab"}, "aaab", "a****"},
		{"prefix at the end is released at the end", []string{"hunter2"}, "hunt", "hunt"},
		{"multi-byte", []string{"pässwört"}, "a pässwört b", "a **** b"},
		{"empty secret ignored", []string{""}, "text", "text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			whole := newRedactor(tt.secrets).write([]byte(tt.input), true)
			require.Equal(t, tt.want, string(whole))

			// The same text arriving one byte at a time redacts the same.
			r := newRedactor(tt.secrets)
			var got []byte
			for i := range len(tt.input) {
				got = append(got, r.write([]byte{tt.input[i]}, false)...)
			}
			got = append(got, r.write(nil, true)...)
			require.Equal(t, tt.want, string(got))
		})
	}
}

func TestRedactor_HoldsBackOnlyPossibleSecretStarts(t *testing.T) {
	t.Parallel()

	r := newRedactor([]string{"hunter2"})
	require.Equal(t, "token=", string(r.write([]byte("token=hun"), false)))
	require.Equal(t, "**** ok", string(r.write([]byte("ter2 ok"), false)))
	require.Equal(t, "hunx", string(r.write([]byte("hunx"), false)))
}

func TestStream_Chunking(t *testing.T) {
	t.Parallel()

	t0 := time.Now()

	t.Run("complete lines go at once, the partial rest waits", func(t *testing.T) {
		t.Parallel()

		s := &stream{name: StreamStdout, red: newRedactor(nil)}
		require.Equal(t, []string{"a\nb\n"}, s.add([]byte("a\nb\nc"), t0))
		_, ok := s.flushPartial(t0.Add(FlushInterval - time.Millisecond))
		require.False(t, ok)
		text, ok := s.flushPartial(t0.Add(FlushInterval))
		require.True(t, ok)
		require.Equal(t, "c", text)
		require.Empty(t, s.finish())
	})

	t.Run("a partial line keeps its age when more arrives", func(t *testing.T) {
		t.Parallel()

		s := &stream{name: StreamStdout, red: newRedactor(nil)}
		require.Empty(t, s.add([]byte("loading"), t0))
		require.Empty(t, s.add([]byte("..."), t0.Add(200*time.Millisecond)))
		due, ok := s.due()
		require.True(t, ok)
		require.Equal(t, t0.Add(FlushInterval), due)
	})

	t.Run("an incomplete rune is not flushed", func(t *testing.T) {
		t.Parallel()

		s := &stream{name: StreamStdout, red: newRedactor(nil)}
		euro := []byte("€")
		s.add(append([]byte("price "), euro[:2]...), t0)
		text, ok := s.flushPartial(t0.Add(time.Second))
		require.True(t, ok)
		require.Equal(t, "price ", text)
		require.Equal(t, []string{"€\n"}, s.add(append(euro[2:], '\n'), t0.Add(time.Second)))
	})

	t.Run("long lines are cut at MaxChunkSize on rune boundaries", func(t *testing.T) {
		t.Parallel()

		s := &stream{name: StreamStdout, red: newRedactor(nil)}
		input := "x" + strings.Repeat("é", MaxChunkSize)
		chunks := s.add([]byte(input), t0)
		chunks = append(chunks, s.finish()...)
		require.Len(t, chunks, 3)
		for _, c := range chunks {
			require.LessOrEqual(t, len(c), MaxChunkSize)
			require.True(t, utf8.ValidString(c))
		}
		require.Equal(t, input, strings.Join(chunks, ""))
	})

	t.Run("NUL and invalid UTF-8 become U+FFFD", func(t *testing.T) {
		t.Parallel()

		s := &stream{name: StreamStdout, red: newRedactor(nil)}
		require.Equal(t, []string{"a\uFFFDb\uFFFD\n"}, s.add([]byte("a\x00b\xff\n"), t0))
	})
}

func TestCappedOutput(t *testing.T) {
	t.Parallel()

	t.Run("under the limit nothing is omitted", func(t *testing.T) {
		t.Parallel()

		c := &cappedOutput{limit: 10}
		c.write("abc")
		c.write("defghij")
		require.Equal(t, "abcdefghij", c.String())
	})

	t.Run("over the limit the middle is omitted", func(t *testing.T) {
		t.Parallel()

		c := &cappedOutput{limit: 10}
		for _, s := range []string{"01234", "56789", "abcdefghij", "KLMNO"} {
			c.write(s)
		}
		require.Equal(t, "01234\n[… 15 bytes omitted …]\nKLMNO", c.String())
	})

	t.Run("cuts keep runes whole", func(t *testing.T) {
		t.Parallel()

		c := &cappedOutput{limit: 10}
		c.write(strings.Repeat("é", 20))
		out := c.String()
		require.True(t, utf8.ValidString(out), out)
		require.Contains(t, out, "bytes omitted")
	})
}

func TestSecretEnvName(t *testing.T) {
	t.Parallel()

	for _, name := range []string{
		"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "DB_PASSWORD", "GITHUB_TOKEN",
		"ARM_CLIENT_SECRET", "MY_SECRET_THING", "TF_VAR_db_password", "DATADOG_API_KEY",
	} {
		require.True(t, SecretEnvName(name), name)
	}
	for _, name := range []string{"PATH", "AWS_REGION", "AWS_ACCESS_KEY_ID", "TOKENIZER", "TF_IN_AUTOMATION"} {
		require.False(t, SecretEnvName(name), name)
	}
}
