package ecsdaemon

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

var (
	clusterName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	familyName  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	// ECS ids: 32 hex digits, or a UUID for resources of the old ARN format.
	resourceID = regexp.MustCompile(`^([0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)
	revision   = regexp.MustCompile(`^[1-9][0-9]*$`)
	// startedBy: "up to 36 letters (uppercase and lowercase), numbers,
	// hyphens (-), forward slash (/), and underscores (_)".
	startedByChars = regexp.MustCompile(`^[A-Za-z0-9/_-]{1,36}$`)
	// Attribute names and values as ECS allows them (PutAttributes), but
	// values without the space ECS allows: the cluster query language has no
	// quoting, so a value with a space cannot be written in a filter.
	attributeName  = regexp.MustCompile(`^[A-Za-z0-9_./\\-]{1,128}$`)
	attributeValue = regexp.MustCompile(`^[A-Za-z0-9_.@/\\:-]{1,128}$`)
)

// filterWords are the cluster query language's keywords; a value spelt like
// one would read as syntax, so it is refused.
var filterWords = []string{
	"and", "or", "not", "in", "not_in", "exists", "not_exists", "equals", "not_equals",
	"matches", "not_matches", "greater_than", "greater_than_equal", "less_than", "less_than_equal",
}

// arnParts splits arn:PARTITION:ecs:REGION:ACCOUNT:KIND/REST; ok is false
// for anything that is not an ECS ARN.
func arnParts(v string) (kind, rest string, ok bool) {
	parts := strings.SplitN(v, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "ecs" || parts[3] == "" || parts[4] == "" {
		return "", "", false
	}
	return strings.Cut(parts[5], "/")
}

func checkCluster(v string) error {
	if clusterName.MatchString(v) {
		return nil
	}
	if kind, name, ok := arnParts(v); ok && kind == "cluster" && clusterName.MatchString(name) {
		return nil
	}
	return fmt.Errorf("cluster: %w: %q is neither a cluster name (1–255 letters, digits, - and _) nor a cluster ARN", ErrInvalidInput, v)
}

// checkResource accepts an id or an ARN of kind (KIND/ID or KIND/CLUSTER/ID).
func checkResource(field, v, kind string) error {
	if resourceID.MatchString(v) {
		return nil
	}
	k, rest, ok := arnParts(v)
	if !ok {
		return fmt.Errorf("%s: %w: %q is neither a %s ARN nor an id", field, ErrInvalidInput, v, kind)
	}
	if k != kind {
		return fmt.Errorf("%s: %w: %q is a %s ARN, not a %s ARN", field, ErrInvalidInput, v, k, kind)
	}
	parts := strings.Split(rest, "/")
	last := parts[len(parts)-1]
	if len(parts) > 2 || !resourceID.MatchString(last) || len(parts) == 2 && !clusterName.MatchString(parts[0]) {
		return fmt.Errorf("%s: %w: %q is not a well-formed %s ARN", field, ErrInvalidInput, v, kind)
	}
	return nil
}

// checkTaskDefinition accepts FAMILY, FAMILY:REVISION or a task-definition
// ARN (which names a revision).
func checkTaskDefinition(v string) error {
	ref := v
	if strings.HasPrefix(v, "arn:") {
		kind, rest, ok := arnParts(v)
		if !ok || kind != "task-definition" {
			return fmt.Errorf("taskDefinition: %w: %q is not a task-definition ARN", ErrInvalidInput, v)
		}
		if !strings.Contains(rest, ":") {
			return fmt.Errorf("taskDefinition: %w: the ARN %q names no revision", ErrInvalidInput, v)
		}
		ref = rest
	}
	family, rev, hasRev := strings.Cut(ref, ":")
	if !familyName.MatchString(family) || hasRev && !revision.MatchString(rev) {
		return fmt.Errorf("taskDefinition: %w: %q is not FAMILY, FAMILY:REVISION or a task-definition ARN", ErrInvalidInput, v)
	}
	return nil
}

func checkStartedBy(v string) error {
	if !startedByChars.MatchString(v) {
		return fmt.Errorf("startedBy: %w: %q: ECS takes 1–36 letters, digits, -, / and _ (a deployment UUID is exactly 36)", ErrInvalidInput, v)
	}
	return nil
}

// Filter is the cluster-query-language expression that selects instances
// carrying every attribute: `attribute:NAME == VALUE` for each, joined by
// "and", in name order; `attribute:NAME exists` where VALUE is "". Names
// and values ECS could not hold, values with a space (the language cannot
// quote them) and values spelt like a keyword of the language are refused.
// No attributes: "" (no filter).
func Filter(attributes map[string]string) (string, error) {
	var terms []string
	for _, name := range slices.Sorted(maps.Keys(attributes)) {
		value := attributes[name]
		if !attributeName.MatchString(name) {
			return "", fmt.Errorf("attributes: %w: name %q: ECS attribute names are 1–128 letters, digits, -, _, ., / and \\", ErrInvalidInput, name)
		}
		switch {
		case value == "":
			terms = append(terms, "attribute:"+name+" exists")
			continue
		case strings.Contains(value, " "):
			return "", fmt.Errorf("attributes: %w: %s=%q: ECS's cluster query language cannot match a value with a space", ErrInvalidInput, name, value)
		case !attributeValue.MatchString(value):
			return "", fmt.Errorf("attributes: %w: %s=%q: ECS attribute values are 1–128 letters, digits, -, _, ., @, /, \\ and :", ErrInvalidInput, name, value)
		case slices.Contains(filterWords, strings.ToLower(value)):
			return "", fmt.Errorf("attributes: %w: %s=%q: the value is a keyword of ECS's cluster query language", ErrInvalidInput, name, value)
		}
		terms = append(terms, "attribute:"+name+" == "+value)
	}
	return strings.Join(terms, " and "), nil
}

func lastSegment(arn string) string {
	return arn[strings.LastIndexByte(arn, '/')+1:]
}
