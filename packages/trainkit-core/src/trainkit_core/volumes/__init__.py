"""What every provider's volumes share: the rules for paths inside a volume, and the
folder volume (`FolderVolume`) through which jobs read and write their mounted volumes.
"""
