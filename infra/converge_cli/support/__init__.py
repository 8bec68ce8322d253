"""What the commands and the console share: the application's conventions, options, output, errors, the deployment."""
