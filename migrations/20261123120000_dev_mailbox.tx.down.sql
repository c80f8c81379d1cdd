DROP TABLE dev_mails;
