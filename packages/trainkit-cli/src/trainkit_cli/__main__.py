from trainkit_cli.main import main

main()
