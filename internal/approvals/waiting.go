package approvals

import (
	"context"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/models"
)

// WaitingFilter narrows what waits for a voter.
type WaitingFilter struct {
	Kind   string // "" for every kind
	Limit  int    // 0: all
	Offset int
}

// Waiting is one page of what waits for a voter.
type Waiting struct {
	Items []Item
	Total int // in all, past this page too
}

// Item is one approval waiting for the voter.
type Item struct {
	Subject  Subject
	Approval models.Approval
	Result   approval.Result // the votes so far
	Summary  Summary
	YourVote approval.Decision // the voter's latest vote, "" for none
}

// WaitingFor lists the approvals of every kind whose votes are open and
// whose voters include voter, the longest waiting first: one query for the
// page, one for its votes, and one per kind to describe the subjects.
func (s *Service) WaitingFor(ctx context.Context, voter string, f WaitingFilter) (Waiting, error) {
	db := s.queue.DB()
	voter = normalize(voter)
	as, total, err := models.ApprovalsWaitingFor(ctx, db, models.ApprovalFilter{Voter: voter, Kind: f.Kind, Limit: f.Limit, Offset: f.Offset})
	if err != nil {
		return Waiting{}, err
	}
	ids := make([]int64, len(as))
	byKind := map[string][]string{}
	for i, a := range as {
		ids[i] = a.ID
		if sub, ok := ParseSubject(a.Subject); ok {
			byKind[sub.Kind] = append(byKind[sub.Kind], sub.ID)
		}
	}
	votes, err := models.VotesOfApprovals(ctx, db, ids)
	if err != nil {
		return Waiting{}, err
	}
	votesOf := map[int64][]models.Vote{}
	for _, v := range votes {
		votesOf[v.ApprovalID] = append(votesOf[v.ApprovalID], v)
	}
	summaries := map[string]map[string]Summary{}
	for name, subjectIDs := range byKind {
		kind, ok := s.kinds[name]
		if !ok {
			continue
		}
		if summaries[name], err = kind.Describe(ctx, db, subjectIDs); err != nil {
			return Waiting{}, err
		}
	}
	out := Waiting{Total: total, Items: make([]Item, 0, len(as))}
	for _, a := range as {
		sub, _ := ParseSubject(a.Subject)
		sum, ok := summaries[sub.Kind][sub.ID]
		if !ok {
			// A kind this process does not know, or a subject gone: still
			// listed, by name, so the count and the page agree.
			sum = Summary{Title: a.Subject}
		}
		it := Item{Subject: sub, Approval: a, Result: Tally(&a, votesOf[a.ID]), Summary: sum}
		for _, v := range it.Result.Votes {
			if v.Voter == voter {
				it.YourVote = v.Decision
			}
		}
		out.Items = append(out.Items, it)
	}
	return out, nil
}
