-- The dev mailbox: under `gantry dev`, every email Gantry sends is kept here
-- too, so a developer can follow a voting link without a mail server.
CREATE TABLE dev_mails (
    id         bigserial PRIMARY KEY,
    recipients text[] NOT NULL,
    subject    text NOT NULL,
    body       text NOT NULL,
    html       text NOT NULL DEFAULT '',
    sent_at    timestamptz NOT NULL DEFAULT now()
);
