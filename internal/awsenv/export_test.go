package awsenv

// CheckToken runs VerifyCallerIdentity's checks without sending the token,
// to test the checks for AWS's own STS hosts without reaching AWS.
func (p *Provider) CheckToken(token string) error {
	_, err := p.checkToken(token)
	return err
}
