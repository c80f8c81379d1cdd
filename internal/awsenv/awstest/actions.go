package awstest

import (
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// XML documents, as the STS and IAM API references show them.

type responseMetadata struct {
	RequestID string `xml:"RequestId"`
}

type errorResponse struct {
	XMLName   xml.Name
	Error     errorBody `xml:"Error"`
	RequestID string    `xml:"RequestId"`
}

type errorBody struct {
	Type    string `xml:"Type"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

type assumeRoleResponse struct {
	XMLName xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ AssumeRoleResponse"`
	Result  struct {
		AssumedRoleUser struct {
			Arn           string `xml:"Arn"`
			AssumedRoleID string `xml:"AssumedRoleId"`
		} `xml:"AssumedRoleUser"`
		Credentials struct {
			AccessKeyID     string `xml:"AccessKeyId"`
			SecretAccessKey string `xml:"SecretAccessKey"`
			SessionToken    string `xml:"SessionToken"`
			Expiration      string `xml:"Expiration"`
		} `xml:"Credentials"`
	} `xml:"AssumeRoleResult"`
	ResponseMetadata responseMetadata `xml:"ResponseMetadata"`
}

type getCallerIdentityResponse struct {
	XMLName xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ GetCallerIdentityResponse"`
	Result  struct {
		Arn     string `xml:"Arn"`
		UserID  string `xml:"UserId"`
		Account string `xml:"Account"`
	} `xml:"GetCallerIdentityResult"`
	ResponseMetadata responseMetadata `xml:"ResponseMetadata"`
}

type putRolePolicyResponse struct {
	XMLName          xml.Name         `xml:"https://iam.amazonaws.com/doc/2010-05-08/ PutRolePolicyResponse"`
	ResponseMetadata responseMetadata `xml:"ResponseMetadata"`
}

type getRolePolicyResponse struct {
	XMLName xml.Name `xml:"https://iam.amazonaws.com/doc/2010-05-08/ GetRolePolicyResponse"`
	Result  struct {
		RoleName       string `xml:"RoleName"`
		PolicyName     string `xml:"PolicyName"`
		PolicyDocument string `xml:"PolicyDocument"` // URL-encoded, RFC 3986
	} `xml:"GetRolePolicyResult"`
	ResponseMetadata responseMetadata `xml:"ResponseMetadata"`
}

// Limits of AssumeRole.
const (
	minDuration      = 900
	maxDuration      = 43200
	defaultDuration  = 3600
	chainingDuration = 3600
)

var (
	sessionNamePattern = regexp.MustCompile(`^[\w+=,.@-]*$`)
	policyNamePattern  = regexp.MustCompile(`^[\w+=,.@-]+$`)
	roleNamePattern    = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)
)

func validation(format string, args ...any) *awsError {
	return sender(http.StatusBadRequest, "ValidationError", format, args...)
}

func (s *Server) assumeRole(caller *principal, params url.Values, now time.Time) (int, any, *awsError) {
	arn, name := params.Get("RoleArn"), params.Get("RoleSessionName")
	switch {
	case !params.Has("RoleArn"):
		return 0, nil, validation("1 validation error detected: Value null at 'roleArn' failed to satisfy constraint: Member must not be null")
	case !params.Has("RoleSessionName"):
		return 0, nil, validation("1 validation error detected: Value null at 'roleSessionName' failed to satisfy constraint: Member must not be null")
	case len(name) < 2:
		return 0, nil, validation("1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint: Member must have length greater than or equal to 2", name)
	case len(name) > 64:
		return 0, nil, validation("1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint: Member must have length less than or equal to 64", name)
	case !sessionNamePattern.MatchString(name):
		return 0, nil, validation(`1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\w+=,.@-]*`, name)
	}
	duration := defaultDuration
	if params.Has("DurationSeconds") {
		d, err := strconv.Atoi(params.Get("DurationSeconds"))
		switch {
		case err != nil:
			return 0, nil, validation("1 validation error detected: Value '%s' at 'durationSeconds' failed to satisfy constraint: Member must be an integer", params.Get("DurationSeconds"))
		case d < minDuration:
			return 0, nil, validation("1 validation error detected: Value '%d' at 'durationSeconds' failed to satisfy constraint: Member must have value greater than or equal to %d", d, minDuration)
		case d > maxDuration:
			return 0, nil, validation("1 validation error detected: Value '%d' at 'durationSeconds' failed to satisfy constraint: Member must have value less than or equal to %d", d, maxDuration)
		}
		duration = d
	}
	if caller.revoked() {
		return 0, nil, accessDenied(caller, "sts:AssumeRole", arn)
	}
	account, roleName, _ := parseRoleARN(arn)
	r := s.roles[account+"/"+roleName]
	if r == nil || r.arn != arn {
		return 0, nil, sender(http.StatusForbidden, "AccessDenied", "User: %s is not authorized to perform: sts:AssumeRole on resource: %s", caller.arn, arn)
	}
	if time.Duration(duration)*time.Second > r.maxSession {
		return 0, nil, validation("The requested DurationSeconds exceeds the MaxSessionDuration set for this role.")
	}
	if caller.role != nil && duration > chainingDuration {
		return 0, nil, validation("The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by role chaining.")
	}
	issued := now.UTC().Truncate(time.Second)
	p := &principal{
		accessKeyID: "ASIA" + randomID(16),
		secret:      randomSecret(),
		token:       randomToken(),
		account:     r.account,
		arn:         "arn:aws:sts::" + r.account + ":assumed-role/" + r.name + "/" + name,
		userID:      r.id + ":" + name,
		role:        r,
		sessionName: name,
		issued:      issued,
		expires:     issued.Add(time.Duration(duration) * time.Second),
	}
	s.principals[p.accessKeyID] = p
	var out assumeRoleResponse
	out.Result.AssumedRoleUser.Arn = p.arn
	out.Result.AssumedRoleUser.AssumedRoleID = p.userID
	out.Result.Credentials.AccessKeyID = p.accessKeyID
	out.Result.Credentials.SecretAccessKey = p.secret
	out.Result.Credentials.SessionToken = p.token
	out.Result.Credentials.Expiration = p.expires.Format(time.RFC3339)
	out.ResponseMetadata.RequestID = requestID()
	return http.StatusOK, out, nil
}

// getCallerIdentity answers whatever the policies say, as AWS does.
func (s *Server) getCallerIdentity(caller *principal) (int, any, *awsError) {
	var out getCallerIdentityResponse
	out.Result.Arn = caller.arn
	out.Result.UserID = caller.userID
	out.Result.Account = caller.account
	out.ResponseMetadata.RequestID = requestID()
	return http.StatusOK, out, nil
}

// callerRole finds a role by name in the caller's account, as IAM does.
func (s *Server) callerRole(caller *principal, action string, params url.Values) (*role, *awsError) {
	name := params.Get("RoleName")
	if !roleNamePattern.MatchString(name) {
		return nil, validation(`1 validation error detected: Value '%s' at 'roleName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\w+=,.@-]+`, name)
	}
	if caller.revoked() {
		return nil, accessDenied(caller, action, "role "+name)
	}
	r := s.roles[caller.account+"/"+name]
	if r == nil {
		return nil, sender(http.StatusNotFound, "NoSuchEntity", "The role with name %s cannot be found.", name)
	}
	return r, nil
}

func checkPolicyName(name string) *awsError {
	if len(name) > 128 || !policyNamePattern.MatchString(name) {
		return validation(`1 validation error detected: Value '%s' at 'policyName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\w+=,.@-]+`, name)
	}
	return nil
}

func (s *Server) putRolePolicy(caller *principal, params url.Values) (int, any, *awsError) {
	r, err := s.callerRole(caller, "iam:PutRolePolicy", params)
	if err != nil {
		return 0, nil, err
	}
	name, doc := params.Get("PolicyName"), params.Get("PolicyDocument")
	if err := checkPolicyName(name); err != nil {
		return 0, nil, err
	}
	var policy struct {
		Version   string
		Statement json.RawMessage
	}
	if json.Unmarshal([]byte(doc), &policy) != nil || len(policy.Statement) == 0 {
		return 0, nil, sender(http.StatusBadRequest, "MalformedPolicyDocument", "Syntax errors in policy.")
	}
	r.policies[name] = doc
	var out putRolePolicyResponse
	out.ResponseMetadata.RequestID = requestID()
	return http.StatusOK, out, nil
}

func (s *Server) getRolePolicy(caller *principal, params url.Values) (int, any, *awsError) {
	r, err := s.callerRole(caller, "iam:GetRolePolicy", params)
	if err != nil {
		return 0, nil, err
	}
	name := params.Get("PolicyName")
	if err := checkPolicyName(name); err != nil {
		return 0, nil, err
	}
	doc, ok := r.policies[name]
	if !ok {
		return 0, nil, sender(http.StatusNotFound, "NoSuchEntity", "The role policy with name %s cannot be found.", name)
	}
	var out getRolePolicyResponse
	out.Result.RoleName = r.name
	out.Result.PolicyName = name
	out.Result.PolicyDocument = uriEncode(doc)
	out.ResponseMetadata.RequestID = requestID()
	return http.StatusOK, out, nil
}

// revokeCutoff recognises AWS's "revoke active sessions" policy: statements
// (an object or a list) of which one is Deny of "*" (or ["*"]) on "*" (or
// ["*"]) under exactly the condition DateLessThan aws:TokenIssueTime. It
// returns that date; other policies are not evaluated.
func revokeCutoff(doc string) (time.Time, bool) {
	var policy struct {
		Statement json.RawMessage
	}
	if json.Unmarshal([]byte(doc), &policy) != nil {
		return time.Time{}, false
	}
	type statement struct {
		Effect    string
		Action    json.RawMessage
		Resource  json.RawMessage
		Condition map[string]map[string]string
	}
	var list []statement
	if json.Unmarshal(policy.Statement, &list) != nil {
		var one statement
		if json.Unmarshal(policy.Statement, &one) != nil {
			return time.Time{}, false
		}
		list = []statement{one}
	}
	var cutoff time.Time
	for _, st := range list {
		if st.Effect != "Deny" || !star(st.Action) || !star(st.Resource) || len(st.Condition) != 1 || len(st.Condition["DateLessThan"]) != 1 {
			continue
		}
		at, ok := st.Condition["DateLessThan"]["aws:TokenIssueTime"]
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339, at)
		if err == nil && t.After(cutoff) {
			cutoff = t
		}
	}
	return cutoff, !cutoff.IsZero()
}

func star(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s == "*"
	}
	var list []string
	return json.Unmarshal(raw, &list) == nil && len(list) == 1 && list[0] == "*"
}
