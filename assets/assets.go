// Package assets embeds Gantry's own CSS, JavaScript and icons. Each file is
// served under a name that carries a hash of its content, so browsers may
// cache it forever and still see every change.
package assets

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where assets are served.
const Prefix = "/assets/"

var (
	hashed   = map[string]string{} // "app.css" → "app.1a2b3c4d.css"
	original = map[string]string{} // the reverse
)

func init() {
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := static.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(e.Name())
		name := strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:4]) + ext
		hashed[e.Name()] = name
		original[name] = e.Name()
	}
}

// Path is the URL of the named asset, e.g. Path("app.css").
func Path(name string) string {
	h, ok := hashed[name]
	if !ok {
		panic("assets: no such asset " + name)
	}
	return Prefix + h
}

// Open returns the content of a hashed asset name, or false when the name is
// unknown (an old hash after a deploy, or a typo).
func Open(hashedName string) ([]byte, bool) {
	name, ok := original[hashedName]
	if !ok {
		return nil, false
	}
	b, err := static.ReadFile("static/" + name)
	return b, err == nil
}
