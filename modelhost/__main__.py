from modelhost.cli.main import main

main()
