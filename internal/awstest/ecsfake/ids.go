package ecsfake

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	clusterName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	familyName  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	// 32 hex digits, or a UUID for resources of ECS's old ARN format
	resourceID = regexp.MustCompile(`^([0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)
	startedBy  = regexp.MustCompile(`^[A-Za-z0-9/_-]{1,36}$`)
)

// ecsARN splits arn:aws:ecs:REGION:ACCOUNT:TYPE/REST when s is an ECS ARN
// of this server's region and account.
func (s *Server) ecsARN(v string) (kind, rest string, ok bool) {
	prefix := "arn:aws:ecs:" + s.region + ":" + s.account + ":"
	resource, found := strings.CutPrefix(v, prefix)
	if !found {
		return "", "", false
	}
	return strings.Cut(resource, "/")
}

// resolveCluster finds the cluster named by a name or cluster ARN; "" is the
// cluster named default, as in ECS.
func (s *Server) resolveCluster(v string) (*cluster, *apiError) {
	name := v
	switch {
	case v == "":
		name = "default"
	case strings.HasPrefix(v, "arn:"):
		kind, rest, ok := s.ecsARN(v)
		if !ok || kind != "cluster" || !clusterName.MatchString(rest) {
			return nil, invalidParameter("Cluster Identifier is invalid")
		}
		name = rest
	case !clusterName.MatchString(v):
		return nil, invalidParameter("Cluster Identifier is invalid")
	}
	c := s.clusters[name]
	if c == nil {
		return nil, clientError("ClusterNotFoundException", "Cluster not found.")
	}
	return c, nil
}

// resourceIDOf takes an id or an ARN of kind in cluster c (long form
// KIND/CLUSTER/ID, or the older KIND/ID) and returns the id. Anything else,
// a task-definition ARN for a task included, is refused as ECS does.
func (s *Server) resourceIDOf(c *cluster, kind, what, v string) (string, *apiError) {
	if resourceID.MatchString(v) {
		return v, nil
	}
	k, rest, ok := s.ecsARN(v)
	if ok && k == kind {
		parts := strings.Split(rest, "/")
		switch {
		case len(parts) == 1 && resourceID.MatchString(parts[0]):
			return parts[0], nil
		case len(parts) == 2 && parts[0] == c.name && resourceID.MatchString(parts[1]):
			return parts[1], nil
		}
	}
	return "", invalidParameter("%s Identifier is invalid", what)
}

func (s *Server) taskID(c *cluster, v string) (string, *apiError) {
	return s.resourceIDOf(c, "task", "Task", v)
}

func (s *Server) instanceID(c *cluster, v string) (string, *apiError) {
	return s.resourceIDOf(c, "container-instance", "Container Instance", v)
}

// resolveTaskDefinition finds a task definition named FAMILY (its latest
// revision), FAMILY:REVISION or by its ARN.
func (s *Server) resolveTaskDefinition(v string) (*taskDefinition, *apiError) {
	ref := v
	if strings.HasPrefix(v, "arn:") {
		kind, rest, ok := s.ecsARN(v)
		if !ok || kind != "task-definition" || !strings.Contains(rest, ":") {
			return nil, invalidParameter("Task Definition Identifier is invalid")
		}
		ref = rest
	}
	family, rev, hasRev := strings.Cut(ref, ":")
	if !familyName.MatchString(family) {
		return nil, invalidParameter("Task Definition Identifier is invalid")
	}
	defs := s.taskDefs[family]
	if !hasRev {
		if len(defs) == 0 {
			return nil, clientError("ClientException", "TaskDefinition not found.")
		}
		return defs[len(defs)-1], nil
	}
	n, err := strconv.Atoi(rev)
	if err != nil || n < 1 {
		return nil, invalidParameter("Invalid revision number. Number: %s", rev)
	}
	if n > len(defs) {
		return nil, clientError("ClientException", "TaskDefinition not found.")
	}
	return defs[n-1], nil
}
