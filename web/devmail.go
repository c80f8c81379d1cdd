package web

import (
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/models"
	devmailview "github.com/gantryhq/gantry/views/pages/devmail"
)

// The dev mailbox of `gantry dev` (registered only when s.Mailbox is set):
// every email Gantry sent, so a developer can follow a voting link without
// a mail server.

const mailboxShown = 200

// mailboxOf is whose mail the signed-in user may read: everyone's for
// admins (the developer running gantry dev), their own for anyone else, so
// that a viewer cannot follow an approver's voting link and vote as them.
func mailboxOf(c echo.Context) string {
	if u := principalOf(c).User; u.Role != models.RoleAdmin {
		return u.Email
	}
	return ""
}

// mailboxPage lists the kept emails the user may read, newest first.
func (s *Server) mailboxPage(c echo.Context) error {
	mails, err := models.ListDevMails(c.Request().Context(), s.DB.Bun, mailboxOf(c), mailboxShown)
	if err != nil {
		return err
	}
	v := devmailview.ListView{Limit: mailboxShown}
	for _, m := range mails {
		v.Rows = append(v.Rows, devmailview.Row{
			ID: m.ID, URL: mailURL(m.ID), Recipients: strings.Join(m.Recipients, ", "), Subject: orNone(m.Subject, "(no subject)"),
			When: clock(m.SentAt), WhenISO: iso(m.SentAt),
		})
	}
	return s.render(c, http.StatusOK, devmailview.List(v))
}

// mailPage is one kept email: its text with the links in it clickable.
func (s *Server) mailPage(c echo.Context) error {
	id, err := pathID(c, "message")
	if err != nil {
		return err
	}
	m, err := models.DevMailByID(c.Request().Context(), s.DB.Bun, id, mailboxOf(c))
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No message %d in the dev mailbox.", id)
	}
	if err != nil {
		return err
	}
	body, links := linkify(m.Body)
	return s.render(c, http.StatusOK, devmailview.Message(devmailview.MessageView{
		ID: m.ID, Subject: orNone(m.Subject, "(no subject)"), Recipients: strings.Join(m.Recipients, ", "),
		When: clock(m.SentAt), WhenISO: iso(m.SentAt), Body: body, Links: links, HasHTML: m.HTML != "",
	}))
}

var linkPattern = regexp.MustCompile(`https?://[^\s<>"'` + "`" + `]+`)

// linkify cuts text into plain stretches and http(s) links (trailing
// punctuation is not part of a link), and lists the links.
func linkify(text string) ([]devmailview.Segment, []string) {
	var segs []devmailview.Segment
	var links []string
	last := 0
	for _, m := range linkPattern.FindAllStringIndex(text, -1) {
		start, end := m[0], m[1]
		for end > start && strings.ContainsRune(".,;:!?)]}", rune(text[end-1])) {
			end--
		}
		if start > last {
			segs = append(segs, devmailview.Segment{Text: text[last:start]})
		}
		link := text[start:end]
		segs = append(segs, devmailview.Segment{Text: link, URL: link})
		links = append(links, link)
		last = end
	}
	if last < len(text) {
		segs = append(segs, devmailview.Segment{Text: text[last:]})
	}
	return segs, links
}

func mailURL(id int64) string { return "/dev/mailbox/" + strconv.FormatInt(id, 10) }
