"""`converge console`: a web page on loopback for what needs a person, over the framework's operator actions."""
