"""One module per study; each is a frozen dataclass built from conf/characterize/<name>.yaml."""
