package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// Approvals is what the approvals service's job needs; internal/approvals
// implements it (declared here to keep jobs free of the services).
type Approvals interface {
	// RequestVoteOn emails voter a signed link to vote on subject
	// ("<kind>:<id>"), while its votes are open.
	RequestVoteOn(ctx context.Context, subject, voter string) error
}

// RequestApprovalVoteArgs emails one voter a link to vote on a subject of
// any kind (an infrastructure execution, a pipeline gate, …). It is
// inserted with the approval it asks about, one per voter; ApprovalID
// names that approval, so a subject voted on again (an interrupted apply
// planned again) asks its voters again.
type RequestApprovalVoteArgs struct {
	Subject    string `json:"subject"`
	Voter      string `json:"voter"`
	ApprovalID int64  `json:"approval_id,omitempty"`
}

func (RequestApprovalVoteArgs) Kind() string { return "request_approval_vote" }
func (RequestApprovalVoteArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// RequestApprovalVoteWorker sends at least once: nothing is sent once the
// votes are decided or closed, and a retry after a sent mail may send it
// again (better twice than never); the link it carries is the same vote.
type RequestApprovalVoteWorker struct {
	river.WorkerDefaults[RequestApprovalVoteArgs]
	Approvals Approvals
}

func (w *RequestApprovalVoteWorker) Work(ctx context.Context, job *river.Job[RequestApprovalVoteArgs]) error {
	return w.Approvals.RequestVoteOn(ctx, job.Args.Subject, job.Args.Voter)
}
